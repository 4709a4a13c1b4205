//! Reading entries: XRANGE, XREVRANGE (range scans of the entry records), XREAD and
//! XREADGROUP, with their blocking forms.
//!
//! Blocking: XREAD/XREADGROUP with BLOCK that find nothing park on their keys through
//! [`Ctx::block_on_args`] (no worker held), and are re-run when a stream they wait on is
//! written. XREAD's `$` is resolved to each stream's last ID before parking, so the re-run reads
//! only what was added after the call, as in Redis.

use super::ids::{block_ms, count, int, is, range_end, range_start, strict_id, write_entry};
use super::store::Stream;
use crate::blocking::TimeoutReply;
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::cmd::spec::Class;
use crate::storage::encoding::Kind;
use crate::storage::stream::PendingRec;
use bytes::Bytes;
use kvik_resp::Proto;
use kvik_types::stream_id::StreamId;

/// XRANGE key start end [COUNT count].
pub fn xrange(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    range(ctx, args, false)
}

/// XREVRANGE key end start [COUNT count].
pub fn xrevrange(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    range(ctx, args, true)
}

fn range(ctx: &mut Ctx<'_>, args: &Args, rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev {
        (&args[3], &args[2])
    } else {
        (&args[2], &args[3])
    };
    let start = range_start(start_arg)?;
    let end = range_end(end_arg)?;
    let mut limit: Option<u64> = None;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "COUNT") && j + 1 < args.len() {
            limit = Some(int(&args[j + 1])?.max(0) as u64);
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let Some(s) = Stream::read(ctx, &args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    if limit == Some(0) {
        ctx.out.null_array();
        return Ok(());
    }
    let mut found = Vec::new();
    s.entries(start, end, rev, |id, v| {
        found.push((id, v.to_vec()));
        Ok(limit.is_none_or(|n| (found.len() as u64) < n))
    })?;
    ctx.out.array(found.len());
    for (id, v) in &found {
        write_entry(ctx.out, *id, v);
    }
    Ok(())
}

/// XREAD's and XREADGROUP's arguments.
struct ReadArgs<'a> {
    /// Deadline in Unix ms (0 = forever) when BLOCK was given.
    block: Option<u64>,
    /// Entries per stream; 0 = no limit.
    count: u64,
    noack: bool,
    group: Option<(&'a [u8], &'a [u8])>,
    /// Index of the first key.
    keys_at: usize,
    streams: usize,
}

/// Redis's option loop of `xreadCommand`.
fn parse_read<'a>(
    ctx: &Ctx<'_>,
    args: &'a Args,
    xreadgroup: bool,
) -> Result<ReadArgs<'a>, CmdError> {
    let mut r = ReadArgs {
        block: None,
        count: 0,
        noack: false,
        group: None,
        keys_at: 0,
        streams: 0,
    };
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = &args[i][..];
        if is(o, "BLOCK") && more > 0 {
            if ctx.session.in_script {
                // As Redis: blocking has no meaning inside a script, and saying so beats the
                // nil that a non-blocking read inside MULTI gives.
                let name = if xreadgroup { "XREADGROUP" } else { "XREAD" };
                return Err(CmdError::err(format_args!(
                    "{name} command is not allowed with BLOCK option from scripts"
                )));
            }
            i += 1;
            r.block = Some(block_ms(&args[i], ctx.now_ms)?);
        } else if is(o, "COUNT") && more > 0 {
            i += 1;
            r.count = count(&args[i])?;
        } else if is(o, "STREAMS") && more > 0 {
            r.keys_at = i + 1;
            let n = args.len() - r.keys_at;
            if !n.is_multiple_of(2) {
                return Err(CmdError::fixed(
                    "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be \
                     specified.",
                ));
            }
            r.streams = n / 2;
            break;
        } else if is(o, "GROUP") && more >= 2 {
            if !xreadgroup {
                return Err(CmdError::fixed(
                    "The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(o, "NOACK") {
            if !xreadgroup {
                return Err(CmdError::fixed(
                    "The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            r.noack = true;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if r.keys_at == 0 {
        return Err(CmdError::syntax());
    }
    if xreadgroup && r.group.is_none() {
        return Err(CmdError::fixed("Missing GROUP option for XREADGROUP"));
    }
    Ok(r)
}

/// The keys of XREAD / XREADGROUP (Redis's `xreadGetKeys`): the first half of what follows
/// STREAMS; none if the options cannot be read.
pub fn read_keys(args: &Args) -> Vec<usize> {
    let mut i = 1;
    while i < args.len() {
        let a = &args[i][..];
        if is(a, "BLOCK") || is(a, "COUNT") {
            i += 1;
        } else if is(a, "GROUP") {
            i += 2;
        } else if is(a, "NOACK") {
        } else if is(a, "STREAMS") {
            let n = args.len() - i - 1;
            if n == 0 || !n.is_multiple_of(2) {
                return Vec::new();
            }
            return (i + 1..=i + n / 2).collect();
        } else {
            break;
        }
        i += 1;
    }
    Vec::new()
}

/// One entry of a read: its ID and fields; `None` fields: a pending entry that no longer exists.
type ReadEntry = (StreamId, Option<Vec<u8>>);

/// Entries read from one stream for the reply.
struct Served {
    key: usize,
    entries: Vec<ReadEntry>,
}

/// Writes XREAD's reply: `[[key, entries] ...]` (RESP2) or `{key: entries}` (RESP3).
fn write_served(ctx: &mut Ctx<'_>, args: &Args, served: &[Served]) {
    if ctx.out.proto == Proto::Resp3 {
        ctx.out.map(served.len());
    } else {
        ctx.out.array(served.len());
    }
    for s in served {
        if ctx.out.proto != Proto::Resp3 {
            ctx.out.array(2);
        }
        ctx.out.bulk(&args[s.key]);
        ctx.out.array(s.entries.len());
        for (id, fields) in &s.entries {
            match fields {
                Some(f) => write_entry(ctx.out, *id, f),
                None => {
                    ctx.out.array(2);
                    super::ids::write_id(ctx.out, *id);
                    ctx.out.null_array();
                }
            }
        }
    }
}

/// Reads up to `count` entries after `after`.
fn entries_after(
    s: &Stream<'_, '_>,
    after: StreamId,
    count: u64,
) -> Result<Vec<ReadEntry>, CmdError> {
    let mut out = Vec::new();
    let Some(start) = after.incr() else {
        return Ok(out);
    };
    s.entries(start, StreamId::MAX, false, |id, v| {
        out.push((id, Some(v.to_vec())));
        Ok(count == 0 || (out.len() as u64) < count)
    })?;
    Ok(out)
}

/// XREAD [COUNT count] [BLOCK ms] STREAMS key [key ...] id [id ...].
pub fn xread(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let r = parse_read(ctx, args, false)?;
    let keys = &args[r.keys_at..r.keys_at + r.streams];
    // Blocking reads hold the keys' locks from the first look to parking, so no XADD slips
    // between them.
    let _g = r.block.map(|_| ctx.lock_keys(keys)).transpose()?;
    let mut ids = Vec::with_capacity(r.streams);
    let mut streams = Vec::with_capacity(r.streams);
    for (i, key) in keys.iter().enumerate() {
        let s = Stream::read(ctx, key)?;
        let arg = &args[r.keys_at + r.streams + i];
        let id = if &arg[..] == b"$" {
            s.as_ref().map_or(StreamId::MIN, |s| s.state.last_id)
        } else if &arg[..] == b">" {
            return Err(CmdError::fixed(
                "The > ID can be specified only when calling XREADGROUP using the GROUP <group> \
                 <consumer> option.",
            ));
        } else {
            strict_id(arg)?
        };
        ids.push(id);
        streams.push(s);
    }
    let mut served = Vec::new();
    for (i, s) in streams.iter().enumerate() {
        let Some(s) = s.as_ref().filter(|s| s.len() > 0) else {
            continue;
        };
        let entries = entries_after(s, ids[i], r.count)?;
        if !entries.is_empty() {
            served.push(Served {
                key: r.keys_at + i,
                entries,
            });
        }
    }
    if !served.is_empty() {
        write_served(ctx, args, &served);
        return Ok(());
    }
    match r.block {
        Some(deadline) => {
            // Park with `$` replaced by the IDs it meant now.
            let mut parked: Vec<Bytes> = args.to_vec();
            for (i, id) in ids.iter().enumerate() {
                parked[r.keys_at + r.streams + i] = Bytes::from(id.to_string());
            }
            ctx.block_on_args(
                Kind::Stream,
                keys,
                deadline,
                TimeoutReply::NullArray,
                parked,
            )
        }
        None => {
            ctx.out.null_array();
            Ok(())
        }
    }
}

/// XREADGROUP GROUP group consumer [COUNT count] [BLOCK ms] [NOACK] STREAMS key [key ...]
/// id|> [id|> ...].
pub fn xreadgroup(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let r = parse_read(ctx, args, true)?;
    let (group, consumer) = r.group.expect("checked by parse_read");
    let keys = &args[r.keys_at..r.keys_at + r.streams];
    // Each stream served is committed on its own: on an I/O thread, where a later one could
    // still end the command with WouldBlock after an earlier one changed, only one stream.
    if ctx.mode.no_wait() && r.streams > 1 {
        return Err(CmdError::WOULD_BLOCK);
    }
    let _g = ctx.lock_keys(keys)?;
    // Check every stream, group and ID before serving any (`None`: `>`).
    let mut ids: Vec<Option<StreamId>> = Vec::with_capacity(r.streams);
    let mut opened = Vec::with_capacity(r.streams);
    for (i, key) in keys.iter().enumerate() {
        let s = Stream::write(ctx, key)?;
        if s.as_ref()
            .map(|s| s.group(group))
            .transpose()?
            .flatten()
            .is_none()
        {
            return Err(CmdError::with(
                crate::error::ErrorKind::NoGroup,
                format_args!(
                    "No such key '{}' or consumer group '{}' in XREADGROUP with GROUP option",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(group)
                ),
            ));
        }
        let arg = &args[r.keys_at + r.streams + i];
        ids.push(match &arg[..] {
            b"$" => {
                return Err(CmdError::fixed(
                    "The $ ID is meaningless in the context of XREADGROUP: you want to read the \
                     history of this consumer by specifying a proper ID, or use the > ID to get \
                     new messages. The $ ID would just return an empty result set.",
                ))
            }
            b">" => None,
            _ => Some(strict_id(arg)?),
        });
        opened.push(s);
    }
    let mut served = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        // A key named twice is read again: the first serve committed changes to it.
        let s = if keys[..i].contains(key) {
            Stream::write(ctx, key)?
        } else {
            opened[i].take()
        };
        let Some(mut s) = s else {
            continue;
        };
        let Some(mut g) = s.group(group)? else {
            continue;
        };
        let mut created = false;
        let entries = match ids[i] {
            Some(after) => {
                created = s.seen_consumer(group, &mut g, consumer, ctx.now_ms)?;
                let out = history(&mut s, group, consumer, after, r.count, ctx.now_ms)?;
                Some(out)
            }
            None if s.len() == 0 => None,
            None => {
                let out = entries_after(&s, g.last_id, r.count)?;
                if out.is_empty() {
                    continue;
                }
                created = s.seen_consumer(group, &mut g, consumer, ctx.now_ms)?;
                // Entries past the group's last ID are pending already only if XGROUP SETID
                // moved it back over delivered ones: past the group's largest pending ID
                // (one seek) none is, and its PEL needs no read per entry.
                let newest_pending = if r.noack {
                    None
                } else {
                    s.last_pending_id(group)?
                };
                for (id, _) in &out {
                    if !r.noack {
                        let old = match newest_pending {
                            Some(p) if *id <= p => s.pending(group, *id)?,
                            _ => None,
                        };
                        let rec = PendingRec {
                            delivery_ms: ctx.now_ms,
                            delivery_count: 1,
                            consumer: consumer.to_vec(),
                        };
                        s.set_pending(group, &mut g, *id, &rec, old.as_ref())?;
                    }
                    s.advance_group(&mut g, *id);
                }
                Some(out)
            }
        };
        if let Some(entries) = entries {
            s.put_group(group, &g);
            s.commit_quiet()?;
            if created {
                ctx.notify(Class::Stream, "xgroup-createconsumer", key);
            }
            served.push(Served {
                key: r.keys_at + i,
                entries,
            });
        }
    }
    if !served.is_empty() {
        write_served(ctx, args, &served);
        return Ok(());
    }
    match r.block {
        Some(deadline) => ctx.block_on(Kind::Stream, keys, deadline, TimeoutReply::NullArray),
        None => {
            ctx.out.null_array();
            Ok(())
        }
    }
}

/// A consumer's pending entries after `after` (XREADGROUP with an ID): each delivered again
/// (time and count updated) if it still exists, else listed with nil fields.
fn history(
    s: &mut Stream<'_, '_>,
    group: &[u8],
    consumer: &[u8],
    after: StreamId,
    count: u64,
    now_ms: u64,
) -> Result<Vec<ReadEntry>, CmdError> {
    let mut ids = Vec::new();
    if let Some(from) = after.incr() {
        s.consumer_pel(group, consumer, from, |id| {
            ids.push(id);
            Ok(count == 0 || (ids.len() as u64) < count)
        })?;
    }
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let fields = s.entry(id)?;
        if fields.is_some() {
            if let Some(mut p) = s.pending(group, id)? {
                p.delivery_ms = now_ms;
                p.delivery_count += 1;
                let old = p.clone();
                let mut g = s.group(group)?.expect("group checked");
                s.set_pending(group, &mut g, id, &p, Some(&old))?;
            }
        }
        out.push((id, fields));
    }
    Ok(out)
}
