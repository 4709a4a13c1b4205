//! Hash field expiry, as Redis 7.4: HEXPIRE HPEXPIRE HEXPIREAT HPEXPIREAT (set a TTL on fields),
//! HTTL HPTTL HEXPIRETIME HPEXPIRETIME (read it), HPERSIST (remove it).
//!
//! Every command takes `FIELDS numfields field ...` and answers one integer per field. The
//! storage side (a field's expiry rides in front of its value once the hash has field TTLs,
//! plus an expiry index entry per field for active expiry) is `storage::encoding`,
//! `storage::expiry_index` and `storage::expire`; writes go through [`CollWrite`], which keeps
//! both. The order of checks is Redis's: the key's type first (WRONGTYPE), then the
//! arguments, then a missing key answers as if none of its fields existed.

use super::collection::CollWrite;
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CacheEffect, Class, CommandSpec, Flags, KeySpec};
use crate::key_list::KeyList;
use crate::storage::encoding::{field_expired, split_field_value, Kind};
use crate::storage::Coll;
use kvik_resp::parse_i64;
use std::collections::HashMap;

const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const ACL_READ_FAST: &[&str] = &["read", "hash", "fast"];
const ACL_WRITE_FAST: &[&str] = &["write", "hash", "fast"];
const PER_FIELD: &str = "O(N) where N is the number of specified fields";

/// One command of the HEXPIRE family: its time argument's unit and base.
#[derive(Clone, Copy)]
struct ExpireForm {
    millis: bool,
    /// Relative to now (HEXPIRE, HPEXPIRE) or absolute (the *AT forms).
    relative: bool,
}

/// One command of the HTTL family: what it answers for a field with a TTL.
#[derive(Clone, Copy)]
struct TtlForm {
    millis: bool,
    /// Time left (HTTL, HPTTL) or the absolute time (HEXPIRETIME, HPEXPIRETIME).
    relative: bool,
}

const fn expire_spec(
    name: &'static str,
    handler: fn(&mut Ctx<'_>, &Args) -> CmdResult,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, -6, WRITE_FAST, KeySpec::ONE, handler)
        .event(Class::Hash, "hexpire")
        .event(Class::Hash, "hdel")
        .event(Class::Hash, "hexpired")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(summary, "7.4.0", PER_FIELD)
}

const fn ttl_spec(
    name: &'static str,
    handler: fn(&mut Ctx<'_>, &Args) -> CmdResult,
    summary: &'static str,
) -> CommandSpec {
    CommandSpec::new(name, -5, READ_FAST, KeySpec::ONE, handler)
        .acl(ACL_READ_FAST)
        .group("hash")
        .doc(summary, "7.4.0", PER_FIELD)
}

pub static COMMANDS: &[CommandSpec] = &[
    expire_spec(
        "hexpire",
        |c, a| {
            hexpire_generic(
                c,
                a,
                ExpireForm {
                    millis: false,
                    relative: true,
                },
            )
        },
        "Set expiry for hash field using relative time to expire (seconds)",
    ),
    expire_spec(
        "hpexpire",
        |c, a| {
            hexpire_generic(
                c,
                a,
                ExpireForm {
                    millis: true,
                    relative: true,
                },
            )
        },
        "Set expiry for hash field using relative time to expire (milliseconds)",
    ),
    expire_spec(
        "hexpireat",
        |c, a| {
            hexpire_generic(
                c,
                a,
                ExpireForm {
                    millis: false,
                    relative: false,
                },
            )
        },
        "Set expiry for hash field using an absolute Unix timestamp (seconds)",
    ),
    expire_spec(
        "hpexpireat",
        |c, a| {
            hexpire_generic(
                c,
                a,
                ExpireForm {
                    millis: true,
                    relative: false,
                },
            )
        },
        "Set expiry for hash field using an absolute Unix timestamp (milliseconds)",
    ),
    ttl_spec(
        "httl",
        |c, a| {
            httl_generic(
                c,
                a,
                TtlForm {
                    millis: false,
                    relative: true,
                },
            )
        },
        "Returns the TTL in seconds of a hash field.",
    ),
    ttl_spec(
        "hpttl",
        |c, a| {
            httl_generic(
                c,
                a,
                TtlForm {
                    millis: true,
                    relative: true,
                },
            )
        },
        "Returns the TTL in milliseconds of a hash field.",
    ),
    ttl_spec(
        "hexpiretime",
        |c, a| {
            httl_generic(
                c,
                a,
                TtlForm {
                    millis: false,
                    relative: false,
                },
            )
        },
        "Returns the expiration time of a hash field as a Unix timestamp, in seconds.",
    ),
    ttl_spec(
        "hpexpiretime",
        |c, a| {
            httl_generic(
                c,
                a,
                TtlForm {
                    millis: true,
                    relative: false,
                },
            )
        },
        "Returns the expiration time of a hash field as a Unix timestamp, in msec.",
    ),
    CommandSpec::new("hpersist", -5, WRITE_FAST, KeySpec::ONE, hpersist)
        .event(Class::Hash, "hpersist")
        .event(Class::Hash, "hexpired")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("hash")
        .doc(
            "Removes the expiration time for each specified field",
            "7.4.0",
            PER_FIELD,
        ),
];

/// The largest field expiry Redis 7.4 accepts, in Unix milliseconds (`HFE_MAX_ABS_TIME_MSEC`:
/// 48 bits less the 2 it reserves).
pub const MAX_FIELD_EXPIRE_MS: i64 = ((1 << 48) - 1) >> 2;

const ERR_FIELDS_MISSING: CmdError =
    CmdError::fixed("Mandatory argument FIELDS is missing or not at the right position");
const ERR_NUMFIELDS_EXPIRE: CmdError =
    CmdError::fixed("Parameter `numFields` should be greater than 0");
const ERR_NUMFIELDS: CmdError = CmdError::fixed("Number of fields must be a positive integer");
const ERR_NUMFIELDS_MISMATCH: CmdError =
    CmdError::fixed("The `numfields` parameter must match the number of arguments");
const ERR_NEGATIVE_TIME: CmdError = CmdError::fixed("invalid expire time, must be >= 0");

/// Per-field replies.
const NO_FIELD: i64 = -2;
const NO_TTL: i64 = -1;
const CONDITION_NOT_MET: i64 = 0;
const SET: i64 = 1;
const DELETED: i64 = 2;

/// The fields of `FIELDS numfields field ...` starting at `args[at]` (the FIELDS keyword),
/// with Redis's errors; `numfields_error` is the command family's text for a bad count.
fn parse_fields(args: &Args, at: usize, numfields_error: CmdError) -> Result<&Args, CmdError> {
    if !args[at].eq_ignore_ascii_case(b"FIELDS") {
        return Err(ERR_FIELDS_MISSING);
    }
    let n = parse_i64(&args[at + 1])
        .filter(|&n| n >= 1)
        .ok_or(numfields_error)?;
    let fields = &args[at + 2..];
    if n as u64 != fields.len() as u64 {
        return Err(ERR_NUMFIELDS_MISMATCH);
    }
    Ok(fields)
}

/// The NX | XX | GT | LT condition of the HEXPIRE family.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
}

impl Condition {
    fn parse(arg: &[u8]) -> Option<Condition> {
        [
            (&b"NX"[..], Condition::Nx),
            (b"XX", Condition::Xx),
            (b"GT", Condition::Gt),
            (b"LT", Condition::Lt),
        ]
        .into_iter()
        .find(|(name, _)| arg.eq_ignore_ascii_case(name))
        .map(|(_, c)| c)
    }

    /// Whether a field whose expiry is `prev` (0: none, which counts as infinite) may get `at`.
    fn allows(self, prev: u64, at: u64) -> bool {
        match self {
            Condition::Always => true,
            Condition::Nx => prev == 0,
            Condition::Xx => prev != 0,
            Condition::Gt => prev != 0 && at > prev,
            Condition::Lt => prev == 0 || at < prev,
        }
    }
}

/// The absolute expiry (Unix ms) the time argument names, with Redis 7.4's checks.
fn parse_expire(ctx: &Ctx<'_>, args: &Args, form: ExpireForm) -> Result<u64, CmdError> {
    let mut at = parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    if at < 0 {
        return Err(ERR_NEGATIVE_TIME);
    }
    let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
    let invalid = || CmdError::err(format_args!("invalid expire time in '{name}' command"));
    if !form.millis {
        if at > MAX_FIELD_EXPIRE_MS / 1000 {
            return Err(invalid());
        }
        at *= 1000;
    }
    let base = if form.relative { ctx.now_ms as i64 } else { 0 };
    if at > MAX_FIELD_EXPIRE_MS - base {
        return Err(invalid());
    }
    Ok((at + base) as u64)
}

/// What an HEXPIRE does to one field.
enum Change {
    Reply(i64),
    Set(Vec<u8>),
    Delete,
}

/// HEXPIRE / HPEXPIRE / HEXPIREAT / HPEXPIREAT key time [NX|XX|GT|LT] FIELDS numfields field ...
fn hexpire_generic(ctx: &mut Ctx<'_>, args: &Args, form: ExpireForm) -> CmdResult {
    // Opening checks the type: WRONGTYPE comes before any argument error, as in Redis.
    let mut w = CollWrite::open(ctx, &args[1], Kind::Hash)?;
    let at = parse_expire(ctx, args, form)?;
    let (condition, fields_at) = match Condition::parse(&args[3]) {
        Some(c) => (c, 4),
        None => (Condition::Always, 3),
    };
    let fields = parse_fields(args, fields_at, ERR_NUMFIELDS_EXPIRE)?;
    let entries = w.get_entries(fields)?;
    // Each field's state as this command leaves it (a field may be named twice).
    let mut staged: HashMap<&[u8], Option<u64>> = HashMap::new();
    let mut changes = Vec::with_capacity(fields.len());
    for (f, entry) in fields.iter().zip(entries) {
        let f = &f[..];
        let current = match staged.get(f) {
            Some(state) => state.and_then(|prev| entry.as_ref().map(|e| (e.0.clone(), prev))),
            None => entry,
        };
        let change = match current {
            None => Change::Reply(NO_FIELD),
            Some((_, prev)) if !condition.allows(prev, at) => Change::Reply(CONDITION_NOT_MET),
            Some(_) if at <= ctx.now_ms => {
                staged.insert(f, None);
                Change::Delete
            }
            Some((v, _)) => {
                staged.insert(f, Some(at));
                Change::Set(v)
            }
        };
        changes.push(change);
    }
    if changes.iter().any(|c| matches!(c, Change::Set(_))) {
        // Before the deletes below: it rewrites every stored field.
        w.enable_field_ttls()?;
    }
    let (mut updated, mut deleted) = (false, false);
    ctx.out.array(fields.len());
    for (f, change) in fields.iter().zip(changes) {
        let reply = match change {
            Change::Reply(r) => r,
            Change::Set(v) => {
                w.set_ttl(f, &v, at)?;
                updated = true;
                SET
            }
            Change::Delete => {
                w.delete(f);
                deleted = true;
                DELETED
            }
        };
        ctx.out.int(reply);
    }
    // `hexpire` if a TTL was set, else `hdel` for fields a past time deleted; `del` if the
    // hash went with them (`commit_notify` also announces fields it found expired).
    let event = if updated || !deleted {
        "hexpire"
    } else {
        "hdel"
    };
    w.commit_notify(ctx, Class::Hash, event)
}

/// HTTL / HPTTL / HEXPIRETIME / HPEXPIRETIME key FIELDS numfields field ...: per field -2 (no
/// such field or key), -1 (no TTL) or the time left / the expiry time.
fn httl_generic(ctx: &mut Ctx<'_>, args: &Args, form: TtlForm) -> CmdResult {
    let found = ctx.read_collection(&args[1], Kind::Hash)?;
    let fields = parse_fields(args, 2, ERR_NUMFIELDS)?;
    let Some((view, meta)) = found else {
        ctx.out.array(fields.len());
        for _ in fields {
            ctx.out.int(NO_FIELD);
        }
        return Ok(());
    };
    let coll = Coll::new(ctx.db(), &args[1], &meta).raw();
    let values = view.get_members(&coll, fields)?;
    let now = ctx.now_ms;
    ctx.out.array(fields.len());
    for v in values {
        let at = match v {
            None => None,
            Some(_) if !meta.field_ttls => Some(0),
            Some(raw) => Some(split_field_value(&raw).0),
        };
        let reply = match at {
            None => NO_FIELD,
            Some(0) => NO_TTL,
            Some(at) if field_expired(at, now) => NO_FIELD,
            Some(at) => {
                let base = if form.relative { now } else { 0 };
                if form.millis {
                    (at - base) as i64
                } else {
                    ((at + 999 - base) / 1000) as i64
                }
            }
        };
        ctx.out.int(reply);
    }
    Ok(())
}

/// HPERSIST key FIELDS numfields field ...: per field -2 (no such field or key), -1 (no TTL)
/// or 1 (TTL removed).
fn hpersist(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut w = CollWrite::open(ctx, &args[1], Kind::Hash)?;
    let fields = parse_fields(args, 2, ERR_NUMFIELDS)?;
    let entries = w.get_entries(fields)?;
    let mut persisted = KeyList::with_capacity(fields.len());
    let mut persist = Vec::new();
    let mut replies = Vec::with_capacity(fields.len());
    for (f, entry) in fields.iter().zip(entries) {
        replies.push(match entry {
            None => NO_FIELD,
            Some((_, 0)) => NO_TTL,
            // A field named again was persisted by its first mention.
            Some(_) if !persisted.insert(f, ()) => NO_TTL,
            Some((v, _)) => {
                persist.push((&f[..], v));
                SET
            }
        });
    }
    for (f, v) in &persist {
        w.set_ttl(f, v, 0)?;
    }
    w.commit_notify(ctx, Class::Hash, "hpersist")?;
    ctx.out.array(replies.len());
    for r in replies {
        ctx.out.int(r);
    }
    Ok(())
}
