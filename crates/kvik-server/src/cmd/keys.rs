//! Keyspace commands that work on keys of any type: DEL, EXISTS, EXPIRE and its family, TTL,
//! RENAME, COPY, MOVE, KEYS, SCAN, RANDOMKEY, OBJECT and friends.
//!
//! Every key is one record in the meta column family, so most of these commands are one point
//! read and, for writes, one WriteBatch under the stripe locks of the keys they touch (held from
//! the read to the commit). Commands that copy a key (RENAME, COPY, MOVE) copy its [`Meta`]; a
//! string's value and expiry are inline, so that is the whole key. A collection's members live in
//! the data (and score) column families under its version and are copied too, under a fresh
//! version, in O(N): see [`write_copy`], the one place that copies a key.
//!
//! Expired keys are invisible to every command here: reads go through `ctx.lookup_*` or
//! [`Storage::get_live`], and scans skip records whose expiry has passed.

use super::cached::KeyReads;
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{container, CacheEffect, Class, CommandSpec, DbRef, Flags, KeySpec};
use crate::glob;
use crate::slot::key_slot;
use crate::storage::encoding::{db_prefix, Kind, Meta};
use crate::storage::{Batch, Cf, Coll, Storage};
use std::sync::atomic::Ordering::Relaxed;

const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);

/// The key of OBJECT's subcommands: `OBJECT ENCODING <key>`.
const SECOND: KeySpec = KeySpec {
    first: 2,
    last: 2,
    step: 1,
};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("del", -2, Flags::WRITE, KeySpec::ALL, del)
.event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "slow"])
        .group("generic")
        .doc("Deletes one or more keys.", "1.0.0", "O(N) where N is the number of keys that will be removed."),
    CommandSpec::new("unlink", -2, WRITE_FAST, KeySpec::ALL, del)
.event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc(
            "Asynchronously deletes one or more keys.",
            "4.0.0",
            "O(1) for each key removed regardless of its size.",
        ),
    CommandSpec::new("exists", -2, READ_FAST, KeySpec::ALL, |c, a| exists(c, a))
        .rtc(|c, a| exists(c, a))
        .rtc_storage()
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc("Determines whether one or more keys exist.", "1.0.0", "O(N) where N is the number of keys to check."),
    CommandSpec::new("type", 2, READ_FAST, KeySpec::ONE, |c, a| type_(c, a))
        .rtc(|c, a| type_(c, a))
        .rtc_storage()
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc("Determines the type of value stored at a key.", "1.0.0", "O(1)"),
    CommandSpec::new("touch", -2, READ_FAST, KeySpec::ALL, touch)
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc(
            "Returns the number of existing keys out of those specified after updating the time they were last accessed.",
            "3.2.1",
            "O(N) where N is the number of keys that will be touched.",
        ),
    CommandSpec::new("expire", -3, WRITE_FAST, KeySpec::ONE, expire)
.event(Class::Generic, "expire")
.event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Sets the expiration time of a key in seconds.", "1.0.0", "O(1)"),
    CommandSpec::new("pexpire", -3, WRITE_FAST, KeySpec::ONE, pexpire)
.event(Class::Generic, "expire")
.event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Sets the expiration time of a key in milliseconds.", "2.6.0", "O(1)"),
    CommandSpec::new("expireat", -3, WRITE_FAST, KeySpec::ONE, expireat)
.event(Class::Generic, "expire")
.event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Sets the expiration time of a key to a Unix timestamp.", "1.2.0", "O(1)"),
    CommandSpec::new("pexpireat", -3, WRITE_FAST, KeySpec::ONE, pexpireat)
.event(Class::Generic, "expire")
.event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Sets the expiration time of a key to a Unix milliseconds timestamp.", "2.6.0", "O(1)"),
    CommandSpec::new("ttl", 2, READ_FAST, KeySpec::ONE, |c, a| ttl(c, a))
        .rtc(|c, a| ttl(c, a))
        .rtc_storage()
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc("Returns the expiration time in seconds of a key.", "1.0.0", "O(1)"),
    CommandSpec::new("pttl", 2, READ_FAST, KeySpec::ONE, |c, a| pttl(c, a))
        .rtc(|c, a| pttl(c, a))
        .rtc_storage()
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc("Returns the expiration time in milliseconds of a key.", "2.6.0", "O(1)"),
    CommandSpec::new("expiretime", 2, READ_FAST, KeySpec::ONE, |c, a| expiretime(c, a))
        .rtc(|c, a| expiretime(c, a))
        .rtc_storage()
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc("Returns the expiration time of a key as a Unix timestamp.", "7.0.0", "O(1)"),
    CommandSpec::new("pexpiretime", 2, READ_FAST, KeySpec::ONE, |c, a| pexpiretime(c, a))
        .rtc(|c, a| pexpiretime(c, a))
        .rtc_storage()
        .acl(&["keyspace", "read", "fast"])
        .group("generic")
        .doc("Returns the expiration time of a key as a Unix milliseconds timestamp.", "7.0.0", "O(1)"),
    CommandSpec::new("persist", 2, WRITE_FAST, KeySpec::ONE, persist)
.event(Class::Generic, "persist")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Removes the expiration time of a key.", "2.2.0", "O(1)"),
    CommandSpec::new("rename", 3, Flags::WRITE, KeySpec::TWO, rename)
.event(Class::Generic, "rename_from")
.event(Class::Generic, "rename_to")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "slow"])
        .group("generic")
        .doc("Renames a key and overwrites the destination.", "1.0.0", "O(1)"),
    CommandSpec::new("renamenx", 3, WRITE_FAST, KeySpec::TWO, renamenx)
.event(Class::Generic, "rename_from")
.event(Class::Generic, "rename_to")
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Renames a key only when the target key name doesn't exist.", "1.0.0", "O(1)"),
    CommandSpec::new("copy", -3, Flags::WRITE.union(Flags::DENYOOM), KeySpec::TWO, copy)
.event(Class::Generic, "copy_to")
        .db_refs(copy_db_refs)
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "slow"])
        .group("generic")
        .doc(
            "Copies the value of a key to a new key.",
            "6.2.0",
            "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        ),
    CommandSpec::new("move", 3, WRITE_FAST, KeySpec::ONE, move_)
.event(Class::Generic, "move_from")
.event(Class::Generic, "move_to")
        .db_refs(|_| vec![DbRef::KeyIn { key: 1, db: 2 }])
        .cache(CacheEffect::Invalidate)
        .acl(&["keyspace", "write", "fast"])
        .group("generic")
        .doc("Moves a key to another database.", "1.0.0", "O(1)"),
    CommandSpec::new("keys", 2, Flags::READONLY, KeySpec::NONE, keys)
        .acl(&["keyspace", "read", "slow", "dangerous"])
        .group("generic")
        .doc(
            "Returns all key names that match a pattern.",
            "1.0.0",
            "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
        ),
    CommandSpec::new("scan", -2, Flags::READONLY, KeySpec::NONE, scan)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc(
            "Iterates over the key names in the database.",
            "2.8.0",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
        ),
    CommandSpec::new("randomkey", 1, Flags::READONLY, KeySpec::NONE, randomkey)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc("Returns a random key name from the database.", "1.0.0", "O(1)"),
    CommandSpec::new("object", -2, Flags::empty(), KeySpec::NONE, container)
        .acl(&["slow"])
        .group("generic")
        .doc("A container for object introspection commands.", "2.2.3", "Depends on subcommand.")
        .subs(OBJECT_SUBCOMMANDS),
];

static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("encoding", 3, Flags::READONLY, SECOND, object_encoding)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc(
            "Returns the internal encoding of a Redis object.",
            "2.2.3",
            "O(1)",
        ),
    CommandSpec::new("freq", 3, Flags::READONLY, SECOND, object_freq)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc(
            "Returns the logarithmic access frequency counter of a Redis object.",
            "4.0.0",
            "O(1)",
        ),
    CommandSpec::new("idletime", 3, Flags::READONLY, SECOND, object_idletime)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc(
            "Returns the time since the last access to a Redis object.",
            "2.2.3",
            "O(1)",
        ),
    CommandSpec::new("refcount", 3, Flags::READONLY, SECOND, object_refcount)
        .acl(&["keyspace", "read", "slow"])
        .group("generic")
        .doc(
            "Returns the reference count of a value of a key.",
            "2.2.3",
            "O(1)",
        ),
    CommandSpec::new(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::NONE,
        object_help,
    )
    .acl(&["keyspace", "slow"])
    .group("generic")
    .doc(
        "Returns helpful text about the different subcommands.",
        "6.2.0",
        "O(1)",
    ),
];

/* ---- Existence, type, deletion ---- */

/// Deletes `keys` (all in the session's database) and returns how many existed. Deleting a
/// collection only removes its metadata: its members become stale and the compaction filter
/// drops them, so DEL is O(1) per key whatever the key's size.
pub fn delete_keys(ctx: &mut Ctx<'_>, keys: &[bytes::Bytes]) -> Result<i64, CmdError> {
    let storage = &ctx.server.storage;
    let db = ctx.db();
    let _guard = storage.lock(db, keys);
    let mut batch = Batch::default();
    let mut removed = 0;
    let mut deleted = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for key in keys {
        if !seen.insert(key) {
            continue;
        }
        // Only records that exist are deleted (an expired one too: it goes now, as Redis's lazy
        // expiry would): deleting a missing key is no write, and must not touch WATCHers.
        let Some(meta) = storage.get_meta(db, key)? else {
            continue;
        };
        if !meta.is_expired(ctx.now_ms) {
            removed += 1;
            deleted.push(key);
        }
        batch.delete_meta(storage, db, key);
    }
    if !batch.is_empty() {
        storage.commit(batch)?;
    }
    for key in deleted {
        ctx.notify(Class::Generic, "del", key);
    }
    Ok(removed)
}

/// DEL and UNLINK: kvik's DEL is already O(1) per key (see [`delete_keys`]), so UNLINK is DEL.
fn del(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = delete_keys(ctx, &args[1..])?;
    ctx.out.int(n);
    Ok(())
}

/// Counts the arguments naming an existing key; a key given twice counts twice, as in Redis.
/// COPY's destination key in the database of each `DB` option.
fn copy_db_refs(args: &Args) -> Vec<DbRef> {
    (3..args.len().saturating_sub(1))
        .filter(|&i| args[i].eq_ignore_ascii_case(b"db"))
        .map(|i| DbRef::KeyIn { key: 2, db: i + 1 })
        .collect()
}

fn count_existing<'a, C: KeyReads<'a>>(ctx: &C, keys: &Args) -> Result<i64, C::Error> {
    let mut n = 0;
    for key in keys {
        if ctx.lookup_head(key)?.is_some() {
            n += 1;
        }
    }
    Ok(n)
}

fn exists<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let n = count_existing(ctx, &args[1..])?;
    ctx.out().int(n);
    Ok(())
}

/// TOUCH: Redis updates the keys' access time; kvik keeps none, so TOUCH only counts.
fn touch(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let n = count_existing(ctx, &args[1..])?;
    ctx.out.int(n);
    Ok(())
}

fn type_<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let name = ctx
        .lookup_head(&args[1])?
        .map_or("none", |m| m.kind.type_name());
    ctx.out().simple(name);
    Ok(())
}

/* ---- Expiry ---- */

/// The options of the EXPIRE family.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct ExpireFlags {
    /// NX: only if the key has no expiry.
    nx: bool,
    /// XX: only if the key has an expiry.
    xx: bool,
    /// GT: only if the new expiry is later than the current one (no expiry counts as infinite).
    gt: bool,
    /// LT: only if the new expiry is earlier than the current one.
    lt: bool,
}

impl ExpireFlags {
    fn parse(opts: &Args) -> Result<ExpireFlags, CmdError> {
        let mut f = ExpireFlags::default();
        for opt in opts {
            match opt.to_ascii_uppercase().as_slice() {
                b"NX" => f.nx = true,
                b"XX" => f.xx = true,
                b"GT" => f.gt = true,
                b"LT" => f.lt = true,
                _ => {
                    return Err(CmdError::err(format_args!(
                        "Unsupported option {}",
                        String::from_utf8_lossy(opt)
                    )))
                }
            }
        }
        if f.nx && (f.xx || f.gt || f.lt) {
            return Err(CmdError::fixed(
                "NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if f.gt && f.lt {
            return Err(CmdError::fixed(
                "GT and LT options at the same time are not compatible",
            ));
        }
        Ok(f)
    }

    /// Whether a key whose expiry is `current` (None: persistent) takes the new expiry `when`.
    fn allow(self, current: Option<i64>, when: i64) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        if self.gt && current.is_none_or(|c| when <= c) {
            return false;
        }
        if self.lt && current.is_some_and(|c| when >= c) {
            return false;
        }
        true
    }
}

/// The shared body of EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: `args[2]` counts `unit_ms`
/// milliseconds, relative to now unless `absolute`. Replies 1 if the expiry was set (or the key
/// deleted because the time has already passed), 0 if the key is missing or a condition failed.
///
/// As in Redis: options are checked before the number, negative times are accepted (they delete
/// the key), and only an overflow of the conversion to absolute milliseconds is "invalid expire
/// time in '<command>' command".
fn expire_generic(
    ctx: &mut Ctx<'_>,
    args: &Args,
    unit_ms: i64,
    absolute: bool,
    command: &str,
) -> CmdResult {
    let flags = ExpireFlags::parse(&args[3..])?;
    let n = kvik_resp::parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    let invalid = || CmdError::err(format_args!("invalid expire time in '{command}' command"));
    let base = if absolute { 0 } else { ctx.now_ms as i64 };
    let when = n
        .checked_mul(unit_ms)
        .and_then(|ms| ms.checked_add(base))
        .ok_or_else(invalid)?;

    let storage = &ctx.server.storage;
    let db = ctx.db();
    let key = &args[1];
    let _guard = storage.lock(db, &[key]);
    let Some(mut meta) = ctx.lookup_write(key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let current = (meta.expire_at_ms != 0).then_some(meta.expire_at_ms as i64);
    if !flags.allow(current, when) {
        ctx.out.int(0);
        return Ok(());
    }
    let mut batch = Batch::default();
    let event = if when <= ctx.now_ms as i64 {
        // Already in the past: the key goes now (a collection's members become stale).
        batch.delete_meta(storage, db, key);
        "del"
    } else {
        meta.expire_at_ms = when as u64;
        batch.put_meta(storage, db, key, &meta);
        "expire"
    };
    storage.commit(batch)?;
    ctx.notify(Class::Generic, event, key);
    ctx.out.int(1);
    Ok(())
}

fn expire(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    expire_generic(ctx, args, 1000, false, "expire")
}

fn pexpire(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    expire_generic(ctx, args, 1, false, "pexpire")
}

fn expireat(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    expire_generic(ctx, args, 1000, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    expire_generic(ctx, args, 1, true, "pexpireat")
}

/// The shared body of TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 for a missing key, -1 for a key
/// without expiry, else the remaining time (TTL rounds to the nearest second, as Redis does) or
/// the absolute expiry (EXPIRETIME truncates to the second).
fn ttl_generic<'a, C: KeyReads<'a>>(
    ctx: &mut C,
    key: &[u8],
    millis: bool,
    absolute: bool,
) -> Result<(), C::Error> {
    let reply = match ctx.lookup_head(key)? {
        None => -2,
        Some(m) if m.expire_at_ms == 0 => -1,
        Some(m) => {
            let at = m.expire_at_ms as i64;
            match (absolute, millis) {
                (true, true) => at,
                (true, false) => at / 1000,
                (false, _) => {
                    let left = (at - ctx.now_ms() as i64).max(0);
                    if millis {
                        left
                    } else {
                        (left + 500) / 1000
                    }
                }
            }
        }
    };
    ctx.out().int(reply);
    Ok(())
}

fn ttl<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    ttl_generic(ctx, &args[1], false, false)
}

fn pttl<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    ttl_generic(ctx, &args[1], true, false)
}

fn expiretime<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    ttl_generic(ctx, &args[1], false, true)
}

fn pexpiretime<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    ttl_generic(ctx, &args[1], true, true)
}

fn persist(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let storage = &ctx.server.storage;
    let db = ctx.db();
    let key = &args[1];
    let _guard = storage.lock(db, &[key]);
    let reply = match ctx.lookup_write(key)? {
        Some(mut meta) if meta.expire_at_ms != 0 => {
            meta.expire_at_ms = 0;
            let mut batch = Batch::default();
            batch.put_meta(storage, db, key, &meta);
            storage.commit(batch)?;
            ctx.notify(Class::Generic, "persist", key);
            1
        }
        _ => 0,
    };
    ctx.out.int(reply);
    Ok(())
}

/* ---- Renaming, copying, moving ---- */

/// Bytes of copied entries per WriteBatch when a collection is copied (see [`write_copy`]).
const COPY_CHUNK: usize = 4 << 20;

/// Returns a batch that makes `dst` in database `dst_db` a copy of `src` of `src_db` (whose live
/// record is `meta`), value and expiry included, replacing whatever `dst` held. The caller holds
/// the locks of both keys, adds what else it writes (RENAME and MOVE delete `src`) and commits.
///
/// A string is entirely inside its meta record: one put. A collection gets a fresh version, so
/// the entries of whatever `dst` held before stay stale (the compaction filter drops them) and
/// never mix with the copied ones, and every entry of `src` (data and score column families) is
/// copied to it: O(N) in the collection's size. Memory stays bounded whatever that size: entries
/// are committed in batches of about [`COPY_CHUNK`] bytes before the returned batch, which puts
/// the meta record naming the new version. Until then the copied entries are invisible, marked
/// as being built (`storage::building`) so that a compaction meanwhile keeps them; the returned
/// batch ends the mark with the meta put. If the server stops in between, the mark is cleared
/// at a later start and the compaction filter drops the entries. The source's entries (RENAME,
/// MOVE) are left to the compaction filter too.
fn write_copy(
    storage: &Storage,
    src_db: u16,
    src: &[u8],
    dst_db: u16,
    dst: &[u8],
    meta: &Meta,
) -> Result<Batch, CmdError> {
    let mut batch = Batch::default();
    let mut meta = meta.clone();
    if meta.is_collection() {
        // Entries as stored: a hash's field TTLs travel in its values (and get index entries).
        let from = Coll::new(src_db, src, &meta).raw();
        meta.version = storage.next_version()?;
        let to = Coll::new(dst_db, dst, &meta).raw();
        let view = storage.latest();
        let mut bytes = 0;
        let mut marked = false;
        for cf in [Cf::Data, Cf::Score] {
            let mut c = view.members(cf, &from);
            c.first();
            while let Some((m, v)) = c.entry() {
                batch.copy_member(storage, cf, &to, &meta, m, v);
                bytes += m.len() + v.len() + 32;
                if bytes >= COPY_CHUNK {
                    // Entries before their meta record: the compaction filter must keep them.
                    if !marked {
                        batch.mark_building(storage, meta.version);
                        marked = true;
                    }
                    storage.commit(std::mem::take(&mut batch))?;
                    bytes = 0;
                }
                c.next();
            }
            c.status()?;
        }
        if marked {
            batch.unmark_building(storage, meta.version);
        }
    }
    batch.put_meta(storage, dst_db, dst, &meta);
    Ok(batch)
}

fn rename(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if rename_generic(ctx, &args[1], &args[2], false)? {
        ctx.out.ok();
    } else {
        ctx.out.int(0);
    }
    Ok(())
}

fn renamenx(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let done = rename_generic(ctx, &args[1], &args[2], true)?;
    ctx.out.int(done as i64);
    Ok(())
}

/// RENAME (`nx` false) and RENAMENX: moves `src` to `dst`, keeping its expiry. Returns whether it
/// renamed; "ERR no such key" if `src` does not exist. Renaming a key to itself succeeds without
/// a write for RENAME and reports 0 for RENAMENX, as in Redis.
fn rename_generic(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], nx: bool) -> Result<bool, CmdError> {
    let storage = &ctx.server.storage;
    let db = ctx.db();
    let _guard = storage.lock(db, &[src, dst]);
    let Some(meta) = ctx.lookup_write(src)? else {
        return Err(CmdError::no_such_key());
    };
    if src == dst {
        return Ok(!nx);
    }
    if nx && ctx.lookup_write(dst)?.is_some() {
        return Ok(false);
    }
    let mut batch = write_copy(storage, db, src, db, dst, &meta)?;
    batch.delete_meta(storage, db, src);
    storage.commit(batch)?;
    ctx.notify(Class::Generic, "rename_from", src);
    ctx.notify(Class::Generic, "rename_to", dst);
    Ok(true)
}

/// Parses a database index argument as Redis does: an integer that fits a C int, else "value is
/// not an integer", then within `databases`, else "DB index is out of range".
fn parse_db(ctx: &Ctx<'_>, arg: &[u8]) -> Result<u16, CmdError> {
    let n = kvik_resp::parse_i64(arg)
        .and_then(|n| i32::try_from(n).ok())
        .ok_or(CmdError::not_integer())?;
    if n < 0 || n >= ctx.server.config.databases() as i32 {
        return Err(CmdError::db_out_of_range());
    }
    Ok(n as u16)
}

/// COPY source destination [DB destination-db] [REPLACE]. Databases are compared and
/// notified as the client names them (logical), stored as their on-disk ones.
fn copy(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let src_logical = ctx.session.db;
    let mut dst_logical = src_logical;
    let mut replace = false;
    let mut i = 3;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < args.len() => {
                dst_logical = parse_db(ctx, &args[i + 1])?;
                i += 1;
            }
            _ => return Err(CmdError::syntax()),
        }
        i += 1;
    }
    if dst_logical != src_logical && ctx.server.cluster.node().is_some() {
        return Err(CmdError::fixed(
            "Copying to another database is not allowed in cluster mode",
        ));
    }
    let (src_db, dst_db) = (ctx.db(), ctx.storage().dbs().physical(dst_logical));
    let (src, dst) = (&args[1][..], &args[2][..]);
    if src_db == dst_db && src == dst {
        return Err(CmdError::fixed(
            "source and destination objects are the same",
        ));
    }
    let storage = &ctx.server.storage;
    let _guard = storage.lock_in([(src_db, src), (dst_db, dst)].into_iter());
    // lookup_read counts the hit or miss (COPY reads its source, as in Redis); the record to
    // copy comes from storage, since a cached collection's meta does not carry its version.
    let meta = match ctx.lookup_read(src)? {
        Some(_) => storage.get_live(src_db, src, ctx.now_ms)?,
        None => None,
    };
    let Some(meta) = meta else {
        ctx.out.int(0);
        return Ok(());
    };
    if !replace && storage.get_live(dst_db, dst, ctx.now_ms)?.is_some() {
        ctx.out.int(0);
        return Ok(());
    }
    let batch = write_copy(storage, src_db, src, dst_db, dst, &meta)?;
    storage.commit(batch)?;
    ctx.notify_in(dst_logical, Class::Generic, "copy_to", dst);
    ctx.out.int(1);
    Ok(())
}

/// MOVE key db: 1 if moved, 0 if the key is missing here or already exists there.
fn move_(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if ctx.server.cluster.node().is_some() {
        return Err(CmdError::fixed("MOVE is not allowed in cluster mode"));
    }
    let src_logical = ctx.session.db;
    let dst_logical = parse_db(ctx, &args[2])?;
    let (src_db, dst_db) = (ctx.db(), ctx.storage().dbs().physical(dst_logical));
    if dst_db == src_db {
        return Err(CmdError::fixed(
            "source and destination objects are the same",
        ));
    }
    let key = &args[1][..];
    let storage = &ctx.server.storage;
    let _guard = storage.lock_in([(src_db, key), (dst_db, key)].into_iter());
    let Some(meta) = ctx.lookup_write(key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    if storage.get_live(dst_db, key, ctx.now_ms)?.is_some() {
        ctx.out.int(0);
        return Ok(());
    }
    let mut batch = write_copy(storage, src_db, key, dst_db, key, &meta)?;
    batch.delete_meta(storage, src_db, key);
    storage.commit(batch)?;
    ctx.notify_in(src_logical, Class::Generic, "move_from", key);
    ctx.notify_in(dst_logical, Class::Generic, "move_to", key);
    ctx.out.int(1);
    Ok(())
}

/* ---- Iterating the keyspace ---- */

/// Calls `f` for the keys of database `db` that `pattern` (`None`: every key) may match, in
/// storage order, from the position `after`, visiting at most `limit` records; returns the
/// position to go on from (`Storage::scan_meta`). A pattern that starts with literal text
/// (`user:*`) reads only the keys with that prefix (`Storage::scan_meta_prefixed`) when the
/// database holds `scan-prefix-seek-min-keys` keys or more, or when the prefix holds a whole
/// hash tag (one slot); the caller still matches each key against the whole pattern. Below
/// that count walking every key is cheaper: a seek into each of the 16,384 slots costs about
/// an uncached read (a data block each), ~0.2 s in all at 10M keys, the walk ~0.24 us a key.
fn visit_keys(
    ctx: &Ctx<'_>,
    db: u16,
    pattern: Option<&[u8]>,
    after: Option<&[u8]>,
    limit: usize,
    f: impl FnMut(&[u8], &Meta) -> bool,
) -> Result<Option<Vec<u8>>, CmdError> {
    let storage = ctx.storage();
    let config = &ctx.server.config;
    let seek = config.scan_prefix_seek.load(Relaxed);
    if let Some(prefix) = pattern.filter(|_| seek).map(glob::literal_prefix) {
        let only_slot = crate::slot::prefix_slot(&prefix);
        let min_keys = config.scan_prefix_seek_min_keys.load(Relaxed);
        if !prefix.is_empty() && (only_slot.is_some() || storage.key_count(db) >= min_keys) {
            return Ok(storage.scan_meta_prefixed(db, &prefix, only_slot, after, limit, f)?);
        }
    }
    Ok(storage.scan_meta(db, after, limit, f)?)
}

/// KEYS pattern: every live key of the database that matches, in storage order.
fn keys(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let pattern = Some(&args[1][..]).filter(|p| *p != b"*");
    let now = ctx.now_ms;
    let mut found: Vec<Vec<u8>> = Vec::new();
    visit_keys(ctx, ctx.db(), pattern, None, usize::MAX, |key, meta| {
        if !meta.is_expired(now) && pattern.is_none_or(|p| glob::matches(p, key)) {
            found.push(key.to_vec());
        }
        true
    })?;
    ctx.out.array(found.len());
    for key in &found {
        ctx.out.bulk(key);
    }
    Ok(())
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
///
/// COUNT (default 10) bounds the records visited by one call, expired and filtered ones
/// included, so a call may return fewer keys than COUNT, or none, before the iteration ends.
///
/// Difference from Redis: a Redis cursor encodes a position in its hash table, so any integer is
/// accepted. kvik's position is a RocksDB key, which clients could not carry (redis-py and
/// redis-cli parse cursors as integers); each reply's cursor is therefore a number that the
/// server maps to the last key visited (`Server::scan_cursors`). A cursor that was never handed
/// out for this database, or was forgotten (the table keeps the most recent ones), gets
/// "ERR invalid cursor" instead of restarting silently. The guarantees are Redis's: a key present
/// for the whole iteration is returned exactly once (keys are visited in storage order).
fn scan(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let invalid_cursor = || CmdError::fixed("invalid cursor");
    let cursor: u64 = std::str::from_utf8(&args[1])
        .ok()
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse().ok())
        .ok_or_else(invalid_cursor)?;
    let mut count: usize = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut type_name: Option<&[u8]> = None;
    let mut i = 2;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let Some(value) = args.get(i + 1) else {
            return Err(CmdError::syntax());
        };
        match opt.as_slice() {
            b"COUNT" => {
                let n = kvik_resp::parse_i64(value).ok_or(CmdError::not_integer())?;
                if n < 1 {
                    return Err(CmdError::syntax());
                }
                count = usize::try_from(n).unwrap_or(usize::MAX);
            }
            // "*" matches everything: skip the matching, as Redis does.
            b"MATCH" => pattern = (&value[..] != b"*").then_some(&value[..]),
            b"TYPE" => type_name = Some(&value[..]),
            _ => return Err(CmdError::syntax()),
        }
        i += 2;
    }
    let db = ctx.db();
    let after = match cursor {
        0 => None,
        c => Some(
            ctx.server
                .scan_cursors
                .lock()
                .get(db, c)
                .ok_or_else(invalid_cursor)?,
        ),
    };
    let now = ctx.now_ms;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let last = visit_keys(ctx, db, pattern, after.as_deref(), count, |key, meta| {
        let wanted = !meta.is_expired(now)
            && pattern.is_none_or(|p| glob::matches(p, key))
            && type_name.is_none_or(|t| t.eq_ignore_ascii_case(meta.kind.type_name().as_bytes()));
        if wanted {
            found.push(key.to_vec());
        }
        true
    })?;
    let next = match last {
        Some(position) => ctx.server.scan_cursors.lock().insert(db, position),
        None => 0,
    };
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len());
    for key in &found {
        ctx.out.bulk(key);
    }
    Ok(())
}

/// RANDOMKEY: a random live key, or nil if the database has none.
///
/// Keys are stored as db | slot | key, so the search starts at a random slot and takes the first
/// live key at or after it; if there is none up to the end of the database, it wraps to the start
/// once and stops at the starting slot. Keys that follow a run of empty slots are more likely to
/// be picked, as keys in long hash-table chains are less likely in Redis: random, not uniform.
fn randomkey(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let db = ctx.db();
    let now = ctx.now_ms;
    let storage = &ctx.server.storage;
    let slot: u16 = rand::random::<u16>() % crate::slot::SLOTS as u16;
    let mut found: Option<Vec<u8>> = None;
    if slot > 0 {
        // Seeks to db|slot: the first key of that slot or later. (The only key whose raw key is
        // exactly db|slot would be the empty key, whose slot is 0.)
        let mut start = db_prefix(db).to_vec();
        start.extend_from_slice(&slot.to_be_bytes());
        storage.scan_meta(db, Some(&start), usize::MAX, |key, meta| {
            if meta.is_expired(now) {
                return true;
            }
            found = Some(key.to_vec());
            false
        })?;
    }
    if found.is_none() {
        storage.scan_meta(db, None, usize::MAX, |key, meta| {
            if slot > 0 && key_slot(key) >= slot {
                return false;
            }
            if meta.is_expired(now) {
                return true;
            }
            found = Some(key.to_vec());
            false
        })?;
    }
    ctx.out.bulk_or_null(found.as_deref());
    Ok(())
}

/* ---- OBJECT ---- */

/// Values 0..SHARED_INTEGERS are shared objects in Redis (OBJECT REFCOUNT reports INT_MAX).
const SHARED_INTEGERS: i64 = 10_000;
/// Redis's refcount of a shared object.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// The integer a string value would be stored as by Redis ("int" encoding), if any.
fn int_encoded(value: &[u8]) -> Option<i64> {
    if value.len() > 20 {
        return None;
    }
    kvik_resp::parse_i64(value)
}

/// Redis 7.0's default thresholds of its compact encodings (`hash-max-listpack-entries`,
/// `hash-max-listpack-value`, `set-max-intset-entries`, `zset-max-listpack-entries`,
/// `zset-max-listpack-value`).
const HASH_MAX_LISTPACK_ENTRIES: u64 = 128;
const HASH_MAX_LISTPACK_VALUE: usize = 64;
const SET_MAX_INTSET_ENTRIES: u64 = 512;
const ZSET_MAX_LISTPACK_ENTRIES: u64 = 128;
const ZSET_MAX_LISTPACK_VALUE: usize = 64;

/// The encoding Redis 7.0 would report for a string.
fn string_encoding(value: &[u8]) -> &'static str {
    if int_encoded(value).is_some() {
        "int"
    } else if value.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// Whether one (member, value) entry keeps a collection in its compact encoding.
type EntryTest = fn(&[u8], &[u8]) -> bool;

/// The encoding Redis 7.0 would report for a collection with `len` entries, given a visitor of
/// its data entries (`each(f)` calls `f(member, value)` until it returns false): listpack or
/// hashtable for hashes, quicklist for lists, intset or hashtable for sets, listpack or skiplist
/// for sorted sets. At most threshold entries are visited (longer ones are decided by length).
///
/// Difference from Redis: Redis never converts back to the compact encoding (a hash that once
/// held a 65-byte value stays "hashtable" after it is removed); kvik has no encodings and
/// answers from the current content, as if the key had been written anew.
fn collection_encoding(
    kind: Kind,
    len: u64,
    each: impl FnOnce(&mut dyn FnMut(&[u8], &[u8]) -> bool) -> Result<(), CmdError>,
) -> Result<&'static str, CmdError> {
    let mut compact = true;
    let (small, big, ok): (&str, &str, EntryTest) = match kind {
        Kind::String => return Ok("embstr"), // not a collection: see string_encoding
        Kind::Bitmap => return Ok("raw"),    // always longer than an embstr
        Kind::List => return Ok("quicklist"),
        Kind::Stream => return Ok("stream"),
        Kind::Hash if len > HASH_MAX_LISTPACK_ENTRIES => return Ok("hashtable"),
        Kind::Set if len > SET_MAX_INTSET_ENTRIES => return Ok("hashtable"),
        Kind::ZSet if len > ZSET_MAX_LISTPACK_ENTRIES => return Ok("skiplist"),
        Kind::Hash => ("listpack", "hashtable", |f, v| {
            f.len() <= HASH_MAX_LISTPACK_VALUE && v.len() <= HASH_MAX_LISTPACK_VALUE
        }),
        Kind::Set => ("intset", "hashtable", |m, _| {
            kvik_resp::parse_i64(m).is_some()
        }),
        Kind::ZSet => ("listpack", "skiplist", |m, _| {
            m.len() <= ZSET_MAX_LISTPACK_VALUE
        }),
    };
    each(&mut |m, v| {
        compact = ok(m, v);
        compact
    })?;
    Ok(if compact { small } else { big })
}

fn object_encoding(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    match encoding_of(ctx, &args[2])? {
        Some(name) => ctx.out.bulk(name.as_bytes()),
        None => ctx.out.null(),
    }
    Ok(())
}

/// The encoding OBJECT ENCODING reports for `key` (and DEBUG OBJECT shows), `None` if the key
/// does not exist. Counts a keyspace hit or miss.
pub(super) fn encoding_of(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<&'static str>, CmdError> {
    let Some(meta) = ctx.lookup_read(key)? else {
        return Ok(None);
    };
    if meta.kind == Kind::String {
        return Ok(Some(string_encoding(&meta.value)));
    }
    // Members and meta from one snapshot, so they agree.
    let db = ctx.db();
    let view = ctx.storage().view();
    let Some(meta) = view.get_live(db, key, ctx.now_ms)? else {
        return Ok(None);
    };
    let coll = Coll::new(db, key, &meta);
    let name = collection_encoding(meta.kind, meta.len, |f| {
        Ok(view.for_each_member(Cf::Data, &coll, f)?)
    })?;
    Ok(Some(name))
}

/// Whether `maxmemory-policy` is an LFU one (OBJECT FREQ works) or not (OBJECT IDLETIME
/// works), as Redis decides which of the two it tracks.
fn lfu_policy(ctx: &Ctx<'_>) -> bool {
    crate::config::Param::lookup("maxmemory-policy")
        .map(|p| p.get(&ctx.server.config))
        .is_some_and(|v| v.contains("lfu"))
}

/// Looks `key` up without counting a hit or touching its access data (Redis's
/// LOOKUP_NOTOUCH), and returns what the hot cache knows of its use (see
/// `Cache::peek_access`): `Err` nil reply if the key does not exist.
fn access_of(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Option<(u8, u64)>>, CmdError> {
    if ctx.lookup_write(key)?.is_none() {
        return Ok(None);
    }
    Ok(Some(ctx.storage().cache().peek_access(ctx.db(), key)))
}

/// OBJECT FREQ: the hot cache's LFU counter of the key (0 when it is not cached: not read
/// since it left the cache, or never), under an LFU `maxmemory-policy`; Redis's error under
/// any other.
fn object_freq(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some(access) = access_of(ctx, &args[2])? else {
        ctx.out.null();
        return Ok(());
    };
    if !lfu_policy(ctx) {
        return Err(CmdError::fixed(
            "An LFU maxmemory policy is not selected, access frequency not tracked. Please note \
             that when switching between policies at runtime LRU and LFU data will take some time to \
             adjust.",
        ));
    }
    ctx.out.int(access.map_or(0, |(freq, _)| freq as i64));
    Ok(())
}

/// OBJECT IDLETIME: seconds since the hot cache last served the key (or filled it). A key the
/// cache does not hold has not been read since it left the cache, or since the server started:
/// kvik reports the time since start (reads of disk keys are never written down). Redis's
/// error under an LFU `maxmemory-policy`.
fn object_idletime(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some(access) = access_of(ctx, &args[2])? else {
        ctx.out.null();
        return Ok(());
    };
    if lfu_policy(ctx) {
        return Err(CmdError::fixed(
            "An LFU maxmemory policy is selected, idle time not tracked. Please note that when \
             switching between policies at runtime LRU and LFU data will take some time to adjust.",
        ));
    }
    let idle = match access {
        Some((_, last)) => crate::clock::coarse_secs().saturating_sub(last),
        None => ctx.server.started.elapsed().as_secs(),
    };
    ctx.out.int(idle as i64);
    Ok(())
}

/// OBJECT REFCOUNT: values are never shared in kvik, so 1; except that an integer string in
/// 0..10000 reports INT_MAX, as Redis's shared integer objects do.
fn object_refcount(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    match ctx.lookup_read(&args[2])? {
        Some(m) => {
            let shared = m.kind == Kind::String
                && int_encoded(&m.value).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n));
            ctx.out.int(if shared { SHARED_REFCOUNT } else { 1 });
        }
        None => ctx.out.null(),
    }
    Ok(())
}

fn object_help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    const LINES: &[&str] = &[
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the internal representation Redis would use for the value of <key>.",
        "FREQ <key>",
        "    Return the logarithmic access frequency counter of <key> (needs an LFU",
        "    maxmemory policy, which kvik does not have).",
        "IDLETIME <key>",
        "    Return the seconds since <key> was last accessed (kvik does not track access",
        "    time: always 0).",
        "REFCOUNT <key>",
        "    Return the number of references to the value of <key>.",
        "HELP",
        "    Print this help.",
    ];
    ctx.out.array(LINES.len());
    for line in LINES {
        ctx.out.simple(line);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A collection copied in several batches keeps every member through a compaction that
    /// runs before the batch naming the new version is committed (RENAME of a million-member
    /// sorted set lost a tenth of it to a compaction meanwhile).
    #[test]
    fn a_copy_keeps_its_members_through_a_compaction_before_its_last_batch() {
        use crate::storage::encoding::Kind;
        let dir = tempfile::tempdir().unwrap();
        let s = Storage::open(dir.path()).unwrap();
        const N: usize = 200_000; // ~10 MB of entries: two batches before the last
        let mut meta = Meta::collection(Kind::Set, s.next_version().unwrap(), 0);
        meta.len = N as u64;
        let mut b = Batch::default();
        for i in 0..N {
            let m = format!("member-{i:012}");
            b.put_member(
                &s,
                Cf::Data,
                &Coll::new(0, b"src", &meta),
                m.as_bytes(),
                b"",
            );
        }
        b.put_meta(&s, 0, b"src", &meta);
        s.commit(b).unwrap();
        let last = write_copy(&s, 0, b"src", 0, b"dst", &meta).unwrap();
        s.compact_all();
        s.commit(last).unwrap();
        let copied = s.get_meta(0, b"dst").unwrap().unwrap();
        let count = || {
            let mut n = 0;
            s.view()
                .for_each_member(Cf::Data, &Coll::new(0, b"dst", &copied), |_, _| {
                    n += 1;
                    true
                })
                .unwrap();
            n
        };
        assert_eq!(count(), N);
        // The last batch ended the mark: once the copy is deleted, its entries go.
        let mut b = Batch::default();
        b.delete_meta(&s, 0, b"dst");
        s.commit(b).unwrap();
        s.compact_all();
        assert_eq!(count(), 0, "the copy's mark outlived it");
    }

    #[test]
    fn expire_flags_follow_redis_rules() {
        let f = |opts: &[&str]| {
            let v: Vec<bytes::Bytes> = opts
                .iter()
                .map(|s| bytes::Bytes::from(s.to_string()))
                .collect();
            ExpireFlags::parse(&v)
        };
        assert!(f(&["nx", "xx"]).is_err());
        assert!(f(&["gt", "LT"]).is_err());
        assert_eq!(
            f(&["foo"]).unwrap_err().to_string(),
            "ERR Unsupported option foo"
        );
        let gt = f(&["GT"]).unwrap();
        assert!(!gt.allow(None, 5));
        assert!(!gt.allow(Some(5), 5));
        assert!(gt.allow(Some(5), 6));
        let lt = f(&["lt"]).unwrap();
        assert!(lt.allow(None, 5));
        assert!(!lt.allow(Some(5), 5));
        assert!(lt.allow(Some(5), 4));
        let nx = f(&["nx"]).unwrap();
        assert!(nx.allow(None, 1) && !nx.allow(Some(1), 2));
        let xx = f(&["xx"]).unwrap();
        assert!(!xx.allow(None, 1) && xx.allow(Some(1), 2));
    }

    #[test]
    fn string_encodings_match_redis() {
        let enc = string_encoding;
        assert_eq!(enc(b"12345"), "int");
        assert_eq!(enc(b"-9223372036854775808"), "int");
        assert_eq!(enc(b"9223372036854775808"), "embstr");
        assert_eq!(enc(b"01"), "embstr");
        assert_eq!(enc(b" 1"), "embstr");
        assert_eq!(enc(b""), "embstr");
        assert_eq!(enc(&[b'a'; 44]), "embstr");
        assert_eq!(enc(&[b'a'; 45]), "raw");
    }

    #[test]
    fn collection_encodings_match_redis_7_0_defaults() {
        let enc = |kind: Kind, entries: &[(&[u8], &[u8])]| {
            let mut visited = 0;
            let name = collection_encoding(kind, entries.len() as u64, |f| {
                for (m, v) in entries {
                    visited += 1;
                    if !f(m, v) {
                        break;
                    }
                }
                Ok(())
            })
            .unwrap();
            (name, visited)
        };
        let big = [b'x'; 65];
        let max = [b'x'; 64];
        assert_eq!(enc(Kind::Hash, &[(b"f", &max)]).0, "listpack");
        assert_eq!(enc(Kind::Hash, &[(b"f", &big)]).0, "hashtable");
        assert_eq!(enc(Kind::Hash, &[(&big, b"v")]).0, "hashtable");
        assert_eq!(enc(Kind::ZSet, &[(&max, b"score")]).0, "listpack");
        assert_eq!(enc(Kind::ZSet, &[(&big, b"score")]).0, "skiplist");
        assert_eq!(enc(Kind::Set, &[(b"1", b""), (b"-9", b"")]).0, "intset");
        // The scan stops at the first entry that decides it.
        assert_eq!(
            enc(Kind::Set, &[(b"1", b""), (b"a", b""), (b"2", b"")]),
            ("hashtable", 2)
        );
        assert_eq!(enc(Kind::Set, &[(b"01", b"")]).0, "hashtable");
        assert_eq!(enc(Kind::List, &[(b"x", b"")]), ("quicklist", 0));
        // Long collections are decided by their length alone.
        let many: Vec<(&[u8], &[u8])> = vec![(b"1", b""); 129];
        assert_eq!(enc(Kind::Hash, &many), ("hashtable", 0));
        assert_eq!(enc(Kind::ZSet, &many), ("skiplist", 0));
        assert_eq!(enc(Kind::Hash, &many[..128]).0, "listpack");
        let ints: Vec<(&[u8], &[u8])> = vec![(b"7", b""); 513];
        assert_eq!(enc(Kind::Set, &ints[..512]).0, "intset");
        assert_eq!(enc(Kind::Set, &ints), ("hashtable", 0));
    }
}
