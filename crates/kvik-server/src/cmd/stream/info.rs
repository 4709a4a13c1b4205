//! XINFO STREAM [FULL [COUNT count]], XINFO GROUPS, XINFO CONSUMERS and XINFO HELP, with
//! Redis 7.0's fields in Redis's order (maps in RESP3, flat arrays in RESP2).
//!
//! `radix-tree-keys` and `radix-tree-nodes` describe Redis's in-memory layout; kvik reports the
//! number of 100-entry nodes Redis would use for the stream at least (and one more node), which
//! is close for streams built by XADD alone.

use super::groups::no_group;
use super::ids::{int, is, write_entry, write_id};
use super::store::Stream;
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::storage::stream::{GroupRec, INVALID_ENTRIES_READ};
use kvik_types::stream_id::StreamId;

fn open<'s, 'k>(ctx: &Ctx<'s>, key: &'k [u8]) -> Result<Stream<'s, 'k>, CmdError> {
    Stream::read(ctx, key)?.ok_or(CmdError::no_such_key())
}

fn field_int(ctx: &mut Ctx<'_>, name: &str, n: i64) {
    ctx.out.bulk(name.as_bytes());
    ctx.out.int(n);
}

fn field_id(ctx: &mut Ctx<'_>, name: &str, id: StreamId) {
    ctx.out.bulk(name.as_bytes());
    write_id(ctx.out, id);
}

fn entries_read(ctx: &mut Ctx<'_>, g: &GroupRec) {
    ctx.out.bulk(b"entries-read");
    if g.entries_read == INVALID_ENTRIES_READ {
        ctx.out.null();
    } else {
        ctx.out.int(g.entries_read);
    }
}

fn lag(ctx: &mut Ctx<'_>, s: &Stream<'_, '_>, g: &GroupRec) {
    ctx.out.bulk(b"lag");
    match s.lag(g) {
        Some(n) => ctx.out.int(n),
        None => ctx.out.null(),
    }
}

/// XINFO STREAM key [FULL [COUNT count]].
pub fn stream(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let s = open(ctx, &args[2])?;
    let mut full = false;
    let mut count: u64 = 10;
    let rest = &args[3..];
    if !rest.is_empty() {
        if !is(&rest[0], "FULL") {
            return Err(CmdError::syntax());
        }
        full = true;
        if rest.len() > 1 {
            if rest.len() != 3 || !is(&rest[1], "COUNT") {
                return Err(CmdError::syntax());
            }
            let n = int(&rest[2])?;
            count = if n < 0 { 10 } else { n as u64 };
        }
    }
    ctx.out.map(if full { 9 } else { 10 });
    let nodes = s.len().div_ceil(100);
    field_int(ctx, "length", s.len() as i64);
    field_int(ctx, "radix-tree-keys", nodes as i64);
    field_int(ctx, "radix-tree-nodes", nodes as i64 + 1);
    field_id(ctx, "last-generated-id", s.state.last_id);
    field_id(ctx, "max-deleted-entry-id", s.state.max_deleted);
    field_int(ctx, "entries-added", s.state.entries_added as i64);
    field_id(ctx, "recorded-first-entry-id", s.state.first_id);
    if !full {
        field_int(ctx, "groups", s.group_count()? as i64);
        for (name, last) in [("first-entry", false), ("last-entry", true)] {
            ctx.out.bulk(name.as_bytes());
            let mut found = None;
            s.entries(StreamId::MIN, StreamId::MAX, last, |id, v| {
                found = Some((id, v.to_vec()));
                Ok(false)
            })?;
            match found {
                Some((id, v)) => write_entry(ctx.out, id, &v),
                None => ctx.out.null(),
            }
        }
        return Ok(());
    }
    ctx.out.bulk(b"entries");
    let mut entries = Vec::new();
    s.entries(StreamId::MIN, StreamId::MAX, false, |id, v| {
        entries.push((id, v.to_vec()));
        Ok(count == 0 || (entries.len() as u64) < count)
    })?;
    ctx.out.array(entries.len());
    for (id, v) in &entries {
        write_entry(ctx.out, *id, v);
    }
    ctx.out.bulk(b"groups");
    let mut groups = Vec::new();
    s.groups(|name, g| {
        groups.push((name.to_vec(), g));
        Ok(())
    })?;
    ctx.out.array(groups.len());
    let within = |n: usize| count == 0 || (n as u64) < count;
    for (name, g) in &groups {
        ctx.out.map(7);
        ctx.out.bulk(b"name");
        ctx.out.bulk(name);
        field_id(ctx, "last-delivered-id", g.last_id);
        entries_read(ctx, g);
        lag(ctx, &s, g);
        field_int(ctx, "pel-count", g.pending as i64);
        ctx.out.bulk(b"pending");
        let mut pel = Vec::new();
        s.pel(name, StreamId::MIN, |id, p| {
            if !within(pel.len()) {
                return Ok(false);
            }
            pel.push((id, p));
            Ok(true)
        })?;
        ctx.out.array(pel.len());
        for (id, p) in &pel {
            ctx.out.array(4);
            write_id(ctx.out, *id);
            ctx.out.bulk(&p.consumer);
            ctx.out.int(p.delivery_ms as i64);
            ctx.out.int(p.delivery_count as i64);
        }
        ctx.out.bulk(b"consumers");
        let consumers = s.consumers(name)?;
        ctx.out.array(consumers.len());
        for (c, rec) in &consumers {
            ctx.out.map(4);
            ctx.out.bulk(b"name");
            ctx.out.bulk(c);
            field_int(ctx, "seen-time", rec.seen_ms as i64);
            field_int(ctx, "pel-count", rec.pending as i64);
            ctx.out.bulk(b"pending");
            let mut ids = Vec::new();
            s.consumer_pel(name, c, StreamId::MIN, |id| {
                if !within(ids.len()) {
                    return Ok(false);
                }
                ids.push(id);
                Ok(true)
            })?;
            ctx.out.array(ids.len());
            for id in ids {
                let p = s
                    .pending(name, id)?
                    .unwrap_or(crate::storage::stream::PendingRec {
                        delivery_ms: 0,
                        delivery_count: 0,
                        consumer: c.clone(),
                    });
                ctx.out.array(3);
                write_id(ctx.out, id);
                ctx.out.int(p.delivery_ms as i64);
                ctx.out.int(p.delivery_count as i64);
            }
        }
    }
    Ok(())
}

/// XINFO GROUPS key.
pub fn groups(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let s = open(ctx, &args[2])?;
    let mut groups = Vec::new();
    s.groups(|name, g| {
        groups.push((name.to_vec(), g));
        Ok(())
    })?;
    ctx.out.array(groups.len());
    for (name, g) in &groups {
        ctx.out.map(6);
        ctx.out.bulk(b"name");
        ctx.out.bulk(name);
        field_int(ctx, "consumers", g.consumers as i64);
        field_int(ctx, "pending", g.pending as i64);
        field_id(ctx, "last-delivered-id", g.last_id);
        entries_read(ctx, g);
        lag(ctx, &s, g);
    }
    Ok(())
}

/// XINFO CONSUMERS key group.
pub fn consumers(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (key, name) = (&args[2][..], &args[3][..]);
    let s = open(ctx, key)?;
    if s.group(name)?.is_none() {
        return Err(no_group(key, name));
    }
    let consumers = s.consumers(name)?;
    ctx.out.array(consumers.len());
    for (c, rec) in &consumers {
        ctx.out.map(3);
        ctx.out.bulk(b"name");
        ctx.out.bulk(c);
        field_int(ctx, "pending", rec.pending as i64);
        field_int(ctx, "idle", (ctx.now_ms as i64 - rec.seen_ms as i64).max(0));
    }
    Ok(())
}

/// XINFO HELP.
pub fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    const LINES: &[&str] = &[
        "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
        "HELP",
        "    Print this help.",
    ];
    ctx.out.array(LINES.len());
    for line in LINES {
        ctx.out.simple(line);
    }
    Ok(())
}
