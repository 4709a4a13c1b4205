//! Consumer groups: XGROUP's subcommands, XACK, XPENDING, XCLAIM and XAUTOCLAIM.
//!
//! A group, each consumer and each pending entry is its own record (see `storage::stream`), so
//! acknowledging or claiming one entry writes a few small records, never the whole group.

use super::ids::{
    any_id, int, int_or, is, range_end, range_start, strict_id, subcommand_syntax, write_entry,
    write_id,
};
use super::store::Stream;
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::cmd::spec::Class;
use crate::error::ErrorKind;
use crate::storage::stream::{GroupRec, PendingRec, INVALID_ENTRIES_READ};
use kvik_types::stream_id::StreamId;

fn lossy(b: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(b)
}

/// "NOGROUP No such key 'k' or consumer group 'g'" (XPENDING, XCLAIM, XAUTOCLAIM).
fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::with(
        ErrorKind::NoGroup,
        format_args!(
            "No such key '{}' or consumer group '{}'",
            lossy(key),
            lossy(group)
        ),
    )
}

/// "NOGROUP No such consumer group 'g' for key name 'k'" (XGROUP, XINFO CONSUMERS).
pub fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::with(
        ErrorKind::NoGroup,
        format_args!(
            "No such consumer group '{}' for key name '{}'",
            lossy(group),
            lossy(key)
        ),
    )
}

const ERR_NEED_KEY: CmdError = CmdError::fixed(
    "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use \
     the MKSTREAM option to create an empty stream automatically.",
);

/// The value of ENTRIESREAD: a counter or -1.
fn entries_read(arg: &[u8]) -> Result<i64, CmdError> {
    let n = int(arg)?;
    if n < 0 && n != INVALID_ENTRIES_READ {
        return Err(CmdError::fixed(
            "value for ENTRIESREAD must be positive or -1",
        ));
    }
    Ok(n)
}

/// The options after XGROUP CREATE's and SETID's ID, checked before the key is looked up (as
/// Redis 7.0 does): MKSTREAM (CREATE only) and ENTRIESREAD. Returns (mkstream, entries-read).
fn group_options(args: &Args, create: bool) -> Result<(bool, i64), CmdError> {
    let mut mkstream = false;
    let mut read = INVALID_ENTRIES_READ;
    let mut i = 5;
    while i < args.len() {
        if create && is(&args[i], "MKSTREAM") {
            mkstream = true;
            i += 1;
        } else if is(&args[i], "ENTRIESREAD") && i + 1 < args.len() {
            read = entries_read(&args[i + 1])?;
            i += 2;
        } else {
            return Err(subcommand_syntax("XGROUP", &args[1]));
        }
    }
    Ok((mkstream, read))
}

/// XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD entries-read].
pub fn create(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (mkstream, read) = group_options(args, true)?;
    let (key, name) = (&args[2][..], &args[3][..]);
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let existing = Stream::write(ctx, key)?;
    if existing.is_none() && !mkstream {
        return Err(ERR_NEED_KEY);
    }
    if args.len() > 8 {
        return Err(subcommand_syntax("XGROUP", &args[1]));
    }
    let id = if &args[4][..] == b"$" {
        existing.as_ref().map_or(StreamId::MIN, |s| s.state.last_id)
    } else {
        strict_id(&args[4])?
    };
    let existed = existing.is_some();
    let mut s = match existing {
        Some(s) => s,
        None => Stream::create(ctx, key)?,
    };
    if s.group(name)?.is_some() {
        return Err(CmdError::new(
            ErrorKind::BusyGroup,
            "Consumer Group name already exists",
        ));
    }
    s.put_group(name, &GroupRec::new(id, read));
    if existed {
        s.commit_quiet()?;
    } else {
        s.commit()?; // MKSTREAM created the key: that is a modification
    }
    ctx.notify(Class::Stream, "xgroup-create", key);
    ctx.out.ok();
    Ok(())
}

/// Opens the stream and group of an XGROUP subcommand that needs both (the caller locks).
fn open_group<'s, 'k>(
    ctx: &Ctx<'s>,
    key: &'k [u8],
    name: &[u8],
) -> Result<(Stream<'s, 'k>, GroupRec), CmdError> {
    let s = Stream::write(ctx, key)?.ok_or(ERR_NEED_KEY)?;
    let g = s.group(name)?.ok_or_else(|| no_group(key, name))?;
    Ok((s, g))
}

/// XGROUP SETID key group id|$ [ENTRIESREAD entries-read].
pub fn setid(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (_, read) = group_options(args, false)?;
    let (key, name) = (&args[2][..], &args[3][..]);
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let (mut s, mut g) = open_group(ctx, key, name)?;
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax("XGROUP", &args[1]));
    }
    let id = if &args[4][..] == b"$" {
        s.state.last_id
    } else {
        any_id(&args[4])?
    };
    g.last_id = id;
    g.entries_read = read;
    s.put_group(name, &g);
    s.commit_quiet()?;
    ctx.notify(Class::Stream, "xgroup-setid", key);
    ctx.out.ok();
    Ok(())
}

/// XGROUP DESTROY key group: 1 if the group existed.
pub fn destroy(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name) = (&args[2][..], &args[3][..]);
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let mut s = Stream::write(ctx, key)?.ok_or(ERR_NEED_KEY)?;
    if s.group(name)?.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    s.destroy_group(name);
    s.commit_quiet()?;
    ctx.notify(Class::Stream, "xgroup-destroy", key);
    ctx.out.int(1);
    Ok(())
}

/// XGROUP CREATECONSUMER key group consumer: 1 if it was created.
pub fn createconsumer(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name) = (&args[2][..], &args[3][..]);
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let (mut s, mut g) = open_group(ctx, key, name)?;
    if s.consumer(name, &args[4])?.is_some() {
        ctx.out.int(0);
        return Ok(());
    }
    s.seen_consumer(name, &mut g, &args[4], ctx.now_ms)?;
    s.put_group(name, &g);
    s.commit_quiet()?;
    ctx.notify(Class::Stream, "xgroup-createconsumer", key);
    ctx.out.int(1);
    Ok(())
}

/// XGROUP DELCONSUMER key group consumer: how many pending entries it had.
pub fn delconsumer(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name) = (&args[2][..], &args[3][..]);
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let (mut s, mut g) = open_group(ctx, key, name)?;
    if s.consumer(name, &args[4])?.is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    let pending = s.delete_consumer(name, &mut g, &args[4])?;
    s.put_group(name, &g);
    s.commit_quiet()?;
    ctx.notify(Class::Stream, "xgroup-delconsumer", key);
    ctx.out.int(pending as i64);
    Ok(())
}

/// XGROUP HELP.
pub fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    const LINES: &[&str] = &[
        "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
        "HELP",
        "    Print this help.",
    ];
    ctx.out.array(LINES.len());
    for line in LINES {
        ctx.out.simple(line);
    }
    Ok(())
}

/// XACK key group id [id ...]: how many pending entries were acknowledged.
pub fn xack(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name) = (&args[1][..], &args[2][..]);
    let _g = ctx.lock_keys(&[key])?;
    let Some(mut s) = Stream::write(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let Some(mut g) = s.group(name)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let ids = args[3..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut acked = 0;
    for id in ids {
        if let Some(p) = s.pending(name, id)? {
            s.remove_pending(name, &mut g, id, &p)?;
            acked += 1;
        }
    }
    if acked > 0 {
        s.put_group(name, &g);
        s.commit_quiet()?;
    }
    ctx.out.int(acked);
    Ok(())
}

/// XPENDING key group [[IDLE min-idle-time] start end count [consumer]].
pub fn xpending(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let argc = args.len();
    if argc != 3 && !(6..=9).contains(&argc) {
        return Err(CmdError::syntax());
    }
    let (key, name) = (&args[1][..], &args[2][..]);
    let mut range = None;
    if argc >= 6 {
        let mut at = 3;
        let mut min_idle = 0;
        if is(&args[3], "IDLE") {
            min_idle = int(&args[4])?;
            if argc < 8 {
                return Err(CmdError::syntax());
            }
            at += 2;
        }
        let count = int(&args[at + 2])?.max(0) as u64;
        let start = range_start(&args[at])?;
        let end = range_end(&args[at + 1])?;
        let consumer = args.get(at + 3).map(|c| &c[..]);
        range = Some((min_idle, start, end, count, consumer));
    }
    let s = Stream::read(ctx, key)?;
    let s = s.ok_or_else(|| no_key_or_group(key, name))?;
    let g = s.group(name)?.ok_or_else(|| no_key_or_group(key, name))?;
    let Some((min_idle, start, end, count, consumer)) = range else {
        return pending_summary(ctx, &s, name, &g);
    };
    let mut rows: Vec<(StreamId, PendingRec)> = Vec::new();
    let now = ctx.now_ms as i64;
    let mut keep = |id: StreamId, p: PendingRec| -> bool {
        if rows.len() as u64 >= count || id > end {
            return false;
        }
        if min_idle == 0 || now - p.delivery_ms as i64 >= min_idle {
            rows.push((id, p));
        }
        (rows.len() as u64) < count
    };
    match consumer {
        Some(c) => {
            if s.consumer(name, c)?.is_none() {
                ctx.out.array(0);
                return Ok(());
            }
            let mut ids = Vec::new();
            if count > 0 {
                s.consumer_pel(name, c, start, |id| {
                    ids.push(id);
                    Ok(id <= end)
                })?;
            }
            for id in ids {
                let Some(p) = s.pending(name, id)? else {
                    continue;
                };
                if !keep(id, p) {
                    break;
                }
            }
        }
        None if count > 0 => s.pel(name, start, |id, p| Ok(keep(id, p)))?,
        None => {}
    }
    ctx.out.array(rows.len());
    for (id, p) in &rows {
        ctx.out.array(4);
        write_id(ctx.out, *id);
        ctx.out.bulk(&p.consumer);
        ctx.out.int((now - p.delivery_ms as i64).max(0));
        ctx.out.int(p.delivery_count as i64);
    }
    Ok(())
}

/// XPENDING key group: count, smallest and largest pending ID, and the count per consumer.
fn pending_summary(ctx: &mut Ctx<'_>, s: &Stream<'_, '_>, name: &[u8], g: &GroupRec) -> CmdResult {
    ctx.out.array(4);
    ctx.out.int(g.pending as i64);
    let mut first = None;
    s.pel(name, StreamId::MIN, |id, _| {
        first = Some(id);
        Ok(false)
    })?;
    let Some(first) = first else {
        ctx.out.null();
        ctx.out.null();
        ctx.out.null_array();
        return Ok(());
    };
    let last = s.last_pending_id(name)?.unwrap_or(first);
    write_id(ctx.out, first);
    write_id(ctx.out, last);
    let owners: Vec<(Vec<u8>, u64)> = s
        .consumers(name)?
        .into_iter()
        .filter(|(_, rec)| rec.pending > 0)
        .map(|(c, rec)| (c, rec.pending))
        .collect();
    ctx.out.array(owners.len());
    for (c, n) in &owners {
        ctx.out.array(2);
        ctx.out.bulk(c);
        ctx.out.bulk(n.to_string().as_bytes());
    }
    Ok(())
}

/// Gives pending entry `id` of `group` to `consumer` (XCLAIM, XAUTOCLAIM): delivery time
/// `delivery_ms`, the count set to `retry` or (unless `justid`) incremented.
#[allow(clippy::too_many_arguments)]
fn claim_one(
    s: &mut Stream<'_, '_>,
    group: &[u8],
    g: &mut GroupRec,
    consumer: &[u8],
    id: StreamId,
    old: Option<PendingRec>,
    delivery_ms: u64,
    retry: Option<u64>,
    justid: bool,
) -> Result<(), CmdError> {
    let mut rec = old.clone().unwrap_or(PendingRec {
        delivery_ms,
        delivery_count: 0,
        consumer: consumer.to_vec(),
    });
    rec.delivery_ms = delivery_ms;
    match retry {
        Some(n) => rec.delivery_count = n,
        None if !justid => rec.delivery_count += 1,
        None => {}
    }
    rec.consumer = consumer.to_vec();
    s.set_pending(group, g, id, &rec, old.as_ref())
}

/// XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms-unix-time]
/// [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid].
pub fn xclaim(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name, consumer) = (&args[1][..], &args[2][..], &args[3][..]);
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let s = Stream::write(ctx, key)?;
    let mut s = s.ok_or_else(|| no_key_or_group(key, name))?;
    let mut g = s.group(name)?.ok_or_else(|| no_key_or_group(key, name))?;
    let min_idle = int_or(&args[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
    let mut ids = Vec::new();
    let mut j = 5;
    while j < args.len() {
        match strict_id(&args[j]) {
            Ok(id) => ids.push(id),
            Err(_) => break,
        }
        j += 1;
    }
    let now = ctx.now_ms as i64;
    let (mut force, mut justid) = (false, false);
    let mut delivery: Option<i64> = None;
    let mut retry: Option<i64> = None;
    let mut last_id = StreamId::MIN;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j][..];
        if is(opt, "FORCE") {
            force = true;
        } else if is(opt, "JUSTID") {
            justid = true;
        } else if is(opt, "IDLE") && more > 0 {
            j += 1;
            delivery = Some(now - int_or(&args[j], "Invalid IDLE option argument for XCLAIM")?);
        } else if is(opt, "TIME") && more > 0 {
            j += 1;
            delivery = Some(int_or(&args[j], "Invalid TIME option argument for XCLAIM")?);
        } else if is(opt, "RETRYCOUNT") && more > 0 {
            j += 1;
            retry = Some(int_or(
                &args[j],
                "Invalid RETRYCOUNT option argument for XCLAIM",
            )?);
        } else if is(opt, "LASTID") && more > 0 {
            j += 1;
            last_id = strict_id(&args[j])?;
        } else {
            return Err(CmdError::err(format_args!(
                "Unrecognized XCLAIM option '{}'",
                lossy(opt)
            )));
        }
        j += 1;
    }
    let mut changed = last_id > g.last_id;
    if changed {
        g.last_id = last_id;
    }
    let delivery_ms = match delivery {
        Some(t) if t >= 0 && t <= now => t as u64,
        _ => ctx.now_ms,
    };
    let retry = retry.filter(|n| *n >= 0).map(|n| n as u64);
    let mut claimed: Vec<(StreamId, Option<Vec<u8>>)> = Vec::new();
    let mut seen = false;
    let mut created = false;
    for id in ids {
        let nack = s.pending(name, id)?;
        let Some(fields) = s.entry(id)? else {
            if let Some(p) = nack {
                s.remove_pending(name, &mut g, id, &p)?;
                changed = true;
            }
            continue;
        };
        let old = match nack {
            None if !force => continue,
            None => None,
            Some(p) => {
                if min_idle > 0 && now - (p.delivery_ms as i64) < min_idle {
                    continue;
                }
                Some(p)
            }
        };
        if !seen {
            created = s.seen_consumer(name, &mut g, consumer, ctx.now_ms)?;
            seen = true;
        }
        claim_one(
            &mut s,
            name,
            &mut g,
            consumer,
            id,
            old,
            delivery_ms,
            retry,
            justid,
        )?;
        claimed.push((id, (!justid).then_some(fields)));
        changed = true;
    }
    if changed {
        s.put_group(name, &g);
        s.commit_quiet()?;
        if created {
            ctx.notify(Class::Stream, "xgroup-createconsumer", key);
        }
    }
    ctx.out.array(claimed.len());
    for (id, fields) in &claimed {
        match fields {
            Some(f) => write_entry(ctx.out, *id, f),
            None => write_id(ctx.out, *id),
        }
    }
    Ok(())
}

/// XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]: the next start,
/// the claimed entries, and the IDs of pending entries that no longer existed (now dropped).
pub fn xautoclaim(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name, consumer) = (&args[1][..], &args[2][..], &args[3][..]);
    const ATTEMPTS_FACTOR: i64 = 10;
    let min_idle = int_or(&args[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
    let start = range_start(&args[5])?;
    let mut count: i64 = 100;
    let mut justid = false;
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "COUNT") && more > 0 {
            let max = i64::MAX / 16;
            count = kvik_resp::parse_i64(&args[j + 1])
                .filter(|n| (1..=max).contains(n))
                .ok_or(CmdError::fixed("COUNT must be > 0"))?;
            j += 1;
        } else if is(&args[j], "JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let s = Stream::write(ctx, key)?;
    let mut s = s.ok_or_else(|| no_key_or_group(key, name))?;
    let mut g = s.group(name)?.ok_or_else(|| no_key_or_group(key, name))?;
    let now = ctx.now_ms as i64;
    // Visit up to `attempts` pending entries from `start`, then note where the next call starts.
    let mut attempts = count.saturating_mul(ATTEMPTS_FACTOR);
    let mut visited: Vec<(StreamId, PendingRec)> = Vec::new();
    let mut next = StreamId::MIN;
    let mut budget = count;
    s.pel(name, start, |id, p| {
        if attempts == 0 || budget == 0 {
            next = id;
            return Ok(false);
        }
        attempts -= 1;
        let idle_enough = min_idle == 0 || now - p.delivery_ms as i64 >= min_idle;
        // Deleted entries and claims count against COUNT; entries not idle enough do not.
        let exists = s.entry(id)?.is_some();
        if !exists || idle_enough {
            budget -= 1;
        }
        visited.push((id, p));
        Ok(true)
    })?;
    let mut claimed: Vec<(StreamId, Vec<u8>)> = Vec::new();
    let mut deleted = Vec::new();
    let mut seen = false;
    let mut created = false;
    for (id, p) in visited {
        let Some(fields) = s.entry(id)? else {
            s.remove_pending(name, &mut g, id, &p)?;
            deleted.push(id);
            continue;
        };
        if min_idle > 0 && now - (p.delivery_ms as i64) < min_idle {
            continue;
        }
        if !seen {
            created = s.seen_consumer(name, &mut g, consumer, ctx.now_ms)?;
            seen = true;
        }
        claim_one(
            &mut s,
            name,
            &mut g,
            consumer,
            id,
            Some(p),
            ctx.now_ms,
            None,
            justid,
        )?;
        claimed.push((id, fields));
    }
    if seen || !deleted.is_empty() {
        s.put_group(name, &g);
        s.commit_quiet()?;
        if created {
            ctx.notify(Class::Stream, "xgroup-createconsumer", key);
        }
    }
    ctx.out.array(3);
    write_id(ctx.out, next);
    ctx.out.array(claimed.len());
    for (id, fields) in &claimed {
        if justid {
            write_id(ctx.out, *id);
        } else {
            write_entry(ctx.out, *id, fields);
        }
    }
    ctx.out.array(deleted.len());
    for id in &deleted {
        write_id(ctx.out, *id);
    }
    Ok(())
}
