//! Popping and sampling: ZPOPMIN ZPOPMAX ZMPOP, the blocking BZPOPMIN BZPOPMAX BZMPOP, and
//! ZRANDMEMBER.
//!
//! The blocking commands follow `crate::blocking`'s contract: parse everything, lock every key,
//! try to pop; with nothing to pop, `Ctx::block_on` parks the client (while the locks are still
//! held), and the same handler runs again to serve it once a write gives one of its keys data.

use super::{reply_items, reply_pairs, Item, ZSet, ZWriter};
use crate::blocking::TimeoutReply;
use crate::cmd::collection::{self, Sampler, ERR_OUT_OF_RANGE};
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::storage::encoding::{decode_score, Kind};
use crate::storage::Cf;
use bytes::Bytes;
use kvik_resp::{parse_i64, Proto};

const ERR_POSITIVE: CmdError = CmdError::fixed("value is out of range, must be positive");
const ERR_NUMKEYS: CmdError = CmdError::fixed("numkeys should be greater than 0");
const ERR_COUNT: CmdError = CmdError::fixed("count should be greater than 0");
const ERR_RAND_COUNT: CmdError = CmdError::fixed(
    "value is out of range, value must between -9223372036854775807 and 9223372036854775807",
);

/// Pops up to `count` members from the first of `keys` that holds a sorted set (the caller
/// holds every key's lock). WRONGTYPE if a key of another kind comes before it. Returns the
/// index of that key and the members in pop order, or `None` if no key exists.
fn pop_first(
    ctx: &Ctx<'_>,
    keys: &[Bytes],
    max: bool,
    count: u64,
) -> Result<Option<(usize, Vec<Item>)>, CmdError> {
    for (i, key) in keys.iter().enumerate() {
        if let Some(mut w) = ZWriter::open(ctx, key, false)? {
            let items = w.pop(count, max)?;
            w.commit_notify(ctx, if max { "zpopmax" } else { "zpopmin" })?;
            return Ok(Some((i, items)));
        }
    }
    Ok(None)
}

fn zpop_generic(ctx: &mut Ctx<'_>, args: &Args, max: bool) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::syntax());
    }
    let count = match args.get(2) {
        Some(a) => Some(
            parse_i64(a)
                .and_then(|n| u64::try_from(n).ok())
                .ok_or(ERR_POSITIVE)?,
        ),
        None => None,
    };
    let key = &args[1];
    if ctx.mode.no_wait() && count.is_some_and(|n| n > collection::IO_THREAD_MAX_POP) {
        return Err(CmdError::WOULD_BLOCK);
    }
    let _g = ctx.lock_keys(&[key])?;
    let popped = pop_first(ctx, std::slice::from_ref(key), max, count.unwrap_or(1))?;
    let items = popped.map(|(_, items)| items).unwrap_or_default();
    if count.is_some() {
        reply_items(ctx.out, &items, true);
    } else {
        ctx.out.array(items.len() * 2);
        for (m, s) in &items {
            ctx.out.bulk(m);
            ctx.out.double(*s);
        }
    }
    Ok(())
}

/// ZPOPMIN key [count]
pub fn zpopmin(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zpop_generic(ctx, args, false)
}

/// ZPOPMAX key [count]
pub fn zpopmax(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zpop_generic(ctx, args, true)
}

/// The arguments of ZMPOP / BZMPOP after the timeout: `numkeys key... MIN|MAX [COUNT n]`
/// starting at `at`. Returns the keys, MAX?, and the count.
fn parse_mpop(args: &Args, at: usize) -> Result<(&[Bytes], bool, u64), CmdError> {
    let numkeys = parse_i64(&args[at]).filter(|n| *n > 0).ok_or(ERR_NUMKEYS)? as u64;
    let where_idx = (at as u64 + 1).saturating_add(numkeys);
    if where_idx >= args.len() as u64 {
        return Err(CmdError::syntax());
    }
    let where_idx = where_idx as usize;
    let max = match args[where_idx].to_ascii_uppercase().as_slice() {
        b"MIN" => false,
        b"MAX" => true,
        _ => return Err(CmdError::syntax()),
    };
    let mut count = None;
    let mut j = where_idx + 1;
    while j < args.len() {
        if count.is_none() && args[j].eq_ignore_ascii_case(b"COUNT") && j + 1 < args.len() {
            let n = parse_i64(&args[j + 1])
                .filter(|n| *n > 0)
                .ok_or(ERR_COUNT)?;
            count = Some(n as u64);
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    Ok((&args[at + 1..where_idx], max, count.unwrap_or(1)))
}

/// ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
pub fn zmpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (keys, max, count) = parse_mpop(args, 1)?;
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), keys);
    match pop_first(ctx, keys, max, count)? {
        Some((i, items)) => {
            ctx.out.array(2);
            ctx.out.bulk(&keys[i]);
            reply_pairs(ctx.out, &items);
        }
        None => ctx.out.null_array(),
    }
    Ok(())
}

fn bzpop_generic(ctx: &mut Ctx<'_>, args: &Args, max: bool) -> CmdResult {
    let deadline = crate::cmd::blocked::parse_timeout(&args[args.len() - 1])?;
    let keys = &args[1..args.len() - 1];
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), keys);
    match pop_first(ctx, keys, max, 1)? {
        Some((i, items)) => {
            let (m, s) = &items[0];
            ctx.out.array(3);
            ctx.out.bulk(&keys[i]);
            ctx.out.bulk(m);
            ctx.out.double(*s);
            Ok(())
        }
        None => ctx.block_on(Kind::ZSet, keys, deadline, TimeoutReply::NullArray),
    }
}

/// BZPOPMIN key [key ...] timeout
pub fn bzpopmin(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    bzpop_generic(ctx, args, false)
}

/// BZPOPMAX key [key ...] timeout
pub fn bzpopmax(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    bzpop_generic(ctx, args, true)
}

/// BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
pub fn bzmpop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (keys, max, count) = parse_mpop(args, 2)?;
    let deadline = crate::cmd::blocked::parse_timeout(&args[1])?;
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), keys);
    match pop_first(ctx, keys, max, count)? {
        Some((i, items)) => {
            ctx.out.array(2);
            ctx.out.bulk(&keys[i]);
            reply_pairs(ctx.out, &items);
            Ok(())
        }
        None => ctx.block_on(Kind::ZSet, keys, deadline, TimeoutReply::NullArray),
    }
}

// ---- ZRANDMEMBER ----------------------------------------------------------------------------

/// ZRANDMEMBER key [count [WITHSCORES]]
///
/// Picks come from `collection::Sampler` over the data CF (uniform for small sets and for
/// counts that are a sizeable share of the set; random walks otherwise). A count of at least the
/// set's size returns the whole set, highest score first, as Redis does for such sets. A negative
/// count whose reply would pass `proto-max-bulk-len` is refused with "ERR value is out of range"
/// (Redis 7.0 would try to build it).
pub fn zrandmember(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() == 2 {
        let picked = match ZSet::read_counted(ctx, &args[1])? {
            Some(z) => {
                match collection::deck_picks(ctx, &z.view, z.coll, Kind::ZSet, z.len, 1, true)? {
                    Some(mut picks) => picks.pop(),
                    None => {
                        collection::walks_on_a_worker(ctx, z.len)?;
                        match z.ranked_picks(1, true)? {
                            Some(mut picks) => picks.pop(),
                            None => Sampler::new(&z.view, Cf::Data, z.coll, z.len).one()?,
                        }
                    }
                }
            }
            None => None,
        };
        match picked {
            Some((m, _)) => ctx.out.bulk(&m),
            None => ctx.out.null(),
        }
        return Ok(());
    }
    let count = parse_i64(&args[2]).ok_or(CmdError::not_integer())?;
    if count == i64::MIN {
        return Err(ERR_RAND_COUNT);
    }
    if args.len() > 4 || (args.len() == 4 && !args[3].eq_ignore_ascii_case(b"WITHSCORES")) {
        return Err(CmdError::syntax());
    }
    let withscores = args.len() == 4;
    if withscores && count < -(i64::MAX / 2) {
        return Err(ERR_OUT_OF_RANGE);
    }
    let z = match ZSet::read_counted(ctx, &args[1])? {
        Some(z) if count != 0 && z.len > 0 => z,
        _ => {
            ctx.out.array(0);
            return Ok(());
        }
    };
    let sampler = Sampler::new(&z.view, Cf::Data, z.coll, z.len);
    let score = |v: &[u8]| decode_score(v).unwrap_or(0.0);
    let n = count.unsigned_abs();
    let mut from_deck =
        collection::deck_picks(ctx, &z.view, z.coll, Kind::ZSet, z.len, n, count > 0)?;
    if from_deck.is_none() {
        // Sampling walks, or the whole set is read: a worker's job past a small set.
        collection::walks_on_a_worker(ctx, z.len)?;
        from_deck = z.ranked_picks(n, count > 0)?;
    }
    if count < 0 {
        let limit = collection::max_reply_bytes(ctx);
        // Each pick costs at least 7 bytes of reply ("$1\r\nx\r\n"): refuse what cannot fit.
        if n.saturating_mul(7) > limit {
            return Err(ERR_OUT_OF_RANGE);
        }
        let out = &mut *ctx.out;
        let pairs = withscores && out.proto == Proto::Resp3;
        out.array(if withscores && !pairs { n * 2 } else { n } as usize);
        let start = out.buf.len() as u64;
        let mut too_big = false;
        sampler.with_repeats_or(from_deck, n, |m, v| {
            if pairs {
                out.array(2);
            }
            out.bulk(m);
            if withscores {
                out.double(score(v));
            }
            too_big = out.buf.len() as u64 - start > limit;
            !too_big
        })?;
        if too_big {
            return Err(ERR_OUT_OF_RANGE);
        }
        return Ok(());
    }
    let items: Vec<Item> = if count as u64 >= z.len {
        let mut all = z.all()?;
        all.reverse();
        all
    } else {
        sampler
            .distinct_or(from_deck, count as u64)?
            .into_iter()
            .map(|(m, v)| {
                let s = score(&v);
                (m, s)
            })
            .collect()
    };
    reply_items(ctx.out, &items, withscores);
    Ok(())
}
