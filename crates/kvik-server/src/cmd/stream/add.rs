//! Writing entries: XADD, XTRIM, XDEL, XSETID, and XLEN beside them.
//!
//! XADD is one entry put and one meta put. Trimming deletes from the head: a few entries one by
//! one, more with one range tombstone, and records the new first ID in the meta record; reads
//! start at that ID, so they never walk over what was dropped (compaction reclaims it).
//!
//! Approximate trimming (`~`) follows Redis's rule with fixed nodes of 100 entries counted from
//! the current first entry (Redis's `stream-node-max-entries` default): only whole nodes go. Redis's
//! nodes also split at 4 KB and keep deleted entries, so the two may trim differently; both keep
//! at least what was asked for.

use super::ids::{id_err, int, is, strict_id, write_id};
use super::store::Stream;
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::cmd::spec::Class;
use crate::storage::stream::encode_fields;
use kvik_types::stream_id::{next_id, parse_add_id, AddId, StreamId, StreamIdError};

/// Entries per node in approximate trimming (Redis's `stream-node-max-entries` default).
const NODE_ENTRIES: u64 = 100;
/// Entries deleted one by one at most; more are dropped with a range tombstone.
const POINT_DELETES: u64 = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    None,
    MaxLen(u64),
    MinId(StreamId),
}

/// XADD's and XTRIM's trimming options.
#[derive(Clone, Copy, Debug)]
pub struct Trim {
    pub strategy: Strategy,
    pub approx: bool,
    /// Most entries one trim may drop; 0 = no limit.
    pub limit: u64,
}

/// What [`parse_options`] found besides the trimming.
struct AddOptions {
    trim: Trim,
    no_mkstream: bool,
    /// Index of XADD's ID argument.
    id_at: usize,
    /// XADD's ID (`Err(Zero)` is reported after the arity check, as Redis does).
    id: Result<AddId, StreamIdError>,
}

/// Redis's `streamParseAddOrTrimArgsOrReply` for XADD (`xadd`) or XTRIM.
fn parse_options(args: &Args, xadd: bool) -> Result<AddOptions, CmdError> {
    let mut trim = Trim {
        strategy: Strategy::None,
        approx: false,
        limit: 0,
    };
    let mut limit_given = false;
    let mut no_mkstream = false;
    let mut id = Ok(AddId::Auto);
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        } else if (is(opt, "MAXLEN") || is(opt, "MINID")) && more > 0 {
            if trim.strategy != Strategy::None {
                return Err(CmdError::fixed(
                    "syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            let next = &args[i + 1][..];
            if more >= 2 && (next == b"~" || next == b"=") {
                trim.approx = next == b"~";
                i += 1;
            }
            i += 1;
            trim.strategy = if is(opt, "MAXLEN") {
                let n = int(&args[i])?;
                if n < 0 {
                    return Err(CmdError::fixed("The MAXLEN argument must be >= 0."));
                }
                Strategy::MaxLen(n as u64)
            } else {
                Strategy::MinId(strict_id(&args[i])?)
            };
        } else if is(opt, "LIMIT") && more > 0 {
            i += 1;
            let n = int(&args[i])?;
            if n < 0 {
                return Err(CmdError::fixed("The LIMIT argument must be >= 0."));
            }
            trim.limit = n as u64;
            limit_given = true;
        } else if xadd && is(opt, "NOMKSTREAM") {
            no_mkstream = true;
        } else if xadd {
            id = match parse_add_id(opt) {
                Err(StreamIdError::Zero) => Err(StreamIdError::Zero),
                other => Ok(other.map_err(id_err)?),
            };
            break;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    if limit_given && trim.strategy == Strategy::None {
        return Err(CmdError::fixed(
            "syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if limit_given && !trim.approx {
        return Err(CmdError::fixed(
            "syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    if !limit_given && trim.approx {
        trim.limit = NODE_ENTRIES * NODE_ENTRIES;
    }
    Ok(AddOptions {
        trim,
        no_mkstream,
        id_at: i,
        id,
    })
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...
pub fn xadd(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let opts = parse_options(args, true)?;
    let fields = &args[(opts.id_at + 1).min(args.len())..];
    if fields.is_empty() || fields.len() % 2 == 1 {
        return Err(CmdError::wrong_args("xadd"));
    }
    let add = opts.id.map_err(id_err)?;
    let key = &args[1];
    let _g = ctx.lock_keys(&[key])?;
    let mut s = match Stream::write(ctx, key)? {
        Some(s) => s,
        None if opts.no_mkstream => {
            ctx.out.null();
            return Ok(());
        }
        None => Stream::create(ctx, key)?,
    };
    let id = next_id(s.state.last_id, add, ctx.now_ms).map_err(id_err)?;
    let (trimmed, new_dropped) = trim(&mut s, &opts.trim, Some(id))?;
    if !new_dropped {
        s.add_entry(id, encode_fields(fields));
    }
    s.state.last_id = id;
    s.state.entries_added += 1;
    s.touch();
    s.commit()?;
    ctx.notify(Class::Stream, "xadd", key);
    if trimmed > 0 {
        ctx.notify(Class::Stream, "xtrim", key);
    }
    write_id(ctx.out, id);
    Ok(())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]: the number of entries deleted.
pub fn xtrim(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let opts = parse_options(args, false)?;
    let Some(mut s) = Stream::write(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let (dropped, _) = trim(&mut s, &opts.trim, None)?;
    s.commit()?;
    if dropped > 0 {
        ctx.notify(Class::Stream, "xtrim", key);
    }
    ctx.out.int(dropped as i64);
    Ok(())
}

/// How many entries to drop from the head of the stream's committed entries followed by
/// `extra` (XADD's new entry, not stored yet).
fn drop_count(s: &Stream<'_, '_>, t: &Trim, extra: Option<StreamId>) -> Result<u64, CmdError> {
    let total = s.len() + u64::from(extra.is_some());
    let within_limit = |dropped: u64, more: u64| t.limit == 0 || dropped + more <= t.limit;
    match t.strategy {
        Strategy::None => Ok(0),
        Strategy::MaxLen(max) if !t.approx => Ok(total.saturating_sub(max)),
        Strategy::MaxLen(max) => {
            let mut dropped = 0;
            while total - dropped > max {
                let node = NODE_ENTRIES.min(total - dropped);
                if !within_limit(dropped, node) || total - dropped - node < max {
                    break;
                }
                dropped += node;
            }
            Ok(dropped)
        }
        Strategy::MinId(min) => {
            let mut walk = MinIdWalk {
                min,
                trim: *t,
                dropped: 0,
                in_node: 0,
                done: false,
            };
            s.entries(StreamId::MIN, StreamId::MAX, false, |id, _| {
                Ok(walk.visit(id))
            })?;
            if let Some(id) = extra {
                if !walk.done {
                    walk.visit(id);
                }
            }
            // A last partial node goes too if all of it is below `min`.
            if t.approx && !walk.done && walk.in_node > 0 && walk.fits(walk.in_node) {
                let last = extra.map_or_else(|| s.last_entry_id(), Ok)?;
                if last < min {
                    walk.dropped += walk.in_node;
                }
            }
            Ok(walk.dropped)
        }
    }
}

/// MINID trimming's walk over the IDs in order: exact trims count those below `min`,
/// approximate ones drop whole nodes whose last ID is below it.
struct MinIdWalk {
    min: StreamId,
    trim: Trim,
    dropped: u64,
    in_node: u64,
    done: bool,
}

impl MinIdWalk {
    fn fits(&self, more: u64) -> bool {
        self.trim.limit == 0 || self.dropped + more <= self.trim.limit
    }

    /// Takes the next ID; false once the walk is over.
    fn visit(&mut self, id: StreamId) -> bool {
        if !self.trim.approx {
            if id >= self.min {
                self.done = true;
                return false;
            }
            self.dropped += 1;
            return true;
        }
        self.in_node += 1;
        if self.in_node == NODE_ENTRIES {
            if id >= self.min || !self.fits(self.in_node) {
                self.done = true;
                return false;
            }
            self.dropped += self.in_node;
            self.in_node = 0;
        }
        true
    }
}

/// Trims `s` per `t`, counting `extra` (XADD's new entry) as its last entry. Returns how many
/// entries were dropped and whether `extra` was among them.
pub fn trim(
    s: &mut Stream<'_, '_>,
    t: &Trim,
    extra: Option<StreamId>,
) -> Result<(u64, bool), CmdError> {
    let n = drop_count(s, t, extra)?;
    if n == 0 {
        return Ok((0, false));
    }
    let stored = n.min(s.len());
    let mut doomed = Vec::new();
    let mut first_kept = None;
    let mut seen = 0;
    s.entries(StreamId::MIN, StreamId::MAX, false, |id, _| {
        if seen == stored {
            first_kept = Some(id);
            return Ok(false);
        }
        if seen < POINT_DELETES || seen + 1 == stored {
            doomed.push(id);
        }
        seen += 1;
        Ok(true)
    })?;
    if stored <= POINT_DELETES {
        for id in doomed {
            s.delete_entry(id);
        }
    } else if let Some(&first) = doomed.first() {
        s.delete_entry_range(first, first_kept);
        s.meta.len -= stored;
    }
    let extra_dropped = n > stored;
    s.state.first_id = match (first_kept, extra) {
        (Some(id), _) => id,
        (None, Some(id)) if !extra_dropped => id,
        _ => StreamId::MIN,
    };
    Ok((n, extra_dropped))
}

/// XDEL key id [id ...]: the number of entries deleted.
pub fn xdel(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let Some(mut s) = Stream::write(ctx, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    // Every ID is checked before any is deleted.
    let ids = args[2..]
        .iter()
        .map(|a| strict_id(a))
        .collect::<Result<Vec<_>, _>>()?;
    let mut deleted = 0;
    let mut first_deleted = false;
    for id in ids {
        if s.entry(id)?.is_none() {
            continue;
        }
        s.delete_entry(id);
        first_deleted |= id == s.state.first_id;
        if id > s.state.max_deleted {
            s.state.max_deleted = id;
        }
        deleted += 1;
    }
    if deleted > 0 {
        if s.len() == 0 {
            s.state.first_id = StreamId::MIN;
        } else if first_deleted {
            // The new first entry: the first committed one not deleted just now.
            let mut first = StreamId::MIN;
            s.entries(s.state.first_id, StreamId::MAX, false, |id, _| {
                if s.entry(id)?.is_some() {
                    first = id;
                    return Ok(false);
                }
                Ok(true)
            })?;
            s.state.first_id = first;
        }
        s.commit()?;
        ctx.notify(Class::Stream, "xdel", key);
    }
    ctx.out.int(deleted);
    Ok(())
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id].
pub fn xsetid(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let id = strict_id(&args[2])?;
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "ENTRIESADDED") && more > 0 {
            let n = int(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::fixed("entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if is(&args[i], "MAXDELETEDID") && more > 0 {
            max_deleted = strict_id(&args[i + 1])?;
            if id < max_deleted {
                return Err(CmdError::fixed(
                    "The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::syntax());
        }
        i += 2;
    }
    let key = &args[1];
    let _g = ctx.storage().lock(ctx.db(), &[key]);
    let Some(mut s) = Stream::write(ctx, key)? else {
        return Err(CmdError::no_such_key());
    };
    if s.len() > 0 {
        if id < s.last_entry_id()? {
            return Err(CmdError::fixed(
                "The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added.is_some_and(|n| s.len() > n) {
            return Err(CmdError::fixed(
                "The entries_added specified in XSETID is smaller than the target stream length",
            ));
        }
    }
    s.state.last_id = id;
    if let Some(n) = entries_added {
        s.state.entries_added = n;
    }
    if max_deleted != StreamId::MIN {
        s.state.max_deleted = max_deleted;
    }
    s.touch();
    s.commit_quiet()?;
    ctx.notify(Class::Stream, "xsetid", key);
    ctx.out.ok();
    Ok(())
}

/// XLEN key.
pub fn xlen(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let len = ctx.collection_len(&args[1], crate::storage::encoding::Kind::Stream)?;
    ctx.out.int(len as i64);
    Ok(())
}
