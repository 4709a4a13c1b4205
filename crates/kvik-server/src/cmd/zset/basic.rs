//! Single-key sorted-set commands: ZADD ZINCRBY ZREM ZCARD ZCOUNT ZLEXCOUNT ZSCORE ZMSCORE
//! ZRANK ZREVRANK, the ZRANGE family (ZRANGE ZRANGESTORE ZRANGEBYSCORE ZREVRANGEBYSCORE
//! ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE), ZREMRANGEBYRANK/SCORE/LEX and ZSCAN.

use super::range::{LexRange, ScoreRange};
use super::{norm, reply_items, store_result, Item, ZSet, ZWriter};
use crate::cmd::cached::{member_values, KeyReads};
use crate::cmd::collection::index_range;
use crate::cmd::collection::MemberScan;
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::glob;
use crate::storage::encoding::{decode_score, Kind};
use crate::storage::Cf;
use kvik_resp::{format_g17, parse_i64, parse_redis_double};

const ERR_XX_NX: CmdError =
    CmdError::fixed("XX and NX options at the same time are not compatible");
const ERR_GT_LT_NX: CmdError =
    CmdError::fixed("GT, LT, and/or NX options at the same time are not compatible");
const ERR_INCR_PAIR: CmdError =
    CmdError::fixed("INCR option supports a single increment-element pair");
const ERR_NAN: CmdError = CmdError::fixed("resulting score is not a number (NaN)");
const ERR_LIMIT_RANK: CmdError = CmdError::fixed(
    "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
);
const ERR_WITHSCORES_LEX: CmdError =
    CmdError::fixed("syntax error, WITHSCORES not supported in combination with BYLEX");

// ---- ZADD, ZINCRBY, ZREM --------------------------------------------------------------------

/// ZADD's options.
#[derive(Clone, Copy, Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
pub fn zadd(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut f = AddFlags::default();
    let mut i = 2;
    while i < args.len() {
        let flag = match args[i].to_ascii_uppercase().as_slice() {
            b"NX" => &mut f.nx,
            b"XX" => &mut f.xx,
            b"GT" => &mut f.gt,
            b"LT" => &mut f.lt,
            b"CH" => &mut f.ch,
            b"INCR" => &mut f.incr,
            _ => break,
        };
        *flag = true;
        i += 1;
    }
    let elems = &args[i..];
    if elems.is_empty() || !elems.len().is_multiple_of(2) {
        return Err(CmdError::syntax());
    }
    if f.nx && f.xx {
        return Err(ERR_XX_NX);
    }
    if (f.nx && (f.gt || f.lt)) || (f.gt && f.lt) {
        return Err(ERR_GT_LT_NX);
    }
    if f.incr && elems.len() > 2 {
        return Err(ERR_INCR_PAIR);
    }
    let mut pairs = Vec::with_capacity(elems.len() / 2);
    for p in elems.chunks(2) {
        let score = parse_redis_double(&p[0]).ok_or(CmdError::not_float())?;
        pairs.push((score, &p[1][..]));
    }
    zadd_generic(ctx, &args[1], f, &pairs)
}

/// ZINCRBY key increment member: ZADD INCR with one pair.
pub fn zincrby(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let incr = parse_redis_double(&args[2]).ok_or(CmdError::not_float())?;
    let f = AddFlags {
        incr: true,
        ..Default::default()
    };
    zadd_generic(ctx, &args[1], f, &[(incr, &args[3][..])])
}

/// The body of ZADD and ZINCRBY (Redis's `zsetAdd` per pair): adds or updates each member per
/// the flags and replies with the count added (CH: added or changed), or with INCR the new
/// score (nil if the flags prevented the update).
fn zadd_generic(ctx: &mut Ctx<'_>, key: &[u8], f: AddFlags, pairs: &[(f64, &[u8])]) -> CmdResult {
    let _g = ctx.lock_keys(&[key])?;
    let Some(mut w) = ZWriter::open(ctx, key, !f.xx)? else {
        if f.incr {
            ctx.out.null();
        } else {
            ctx.out.int(0);
        }
        return Ok(());
    };
    let (mut added, mut updated, mut processed) = (0i64, 0i64, 0i64);
    let mut newscore = 0.0;
    for &(score, member) in pairs {
        match w.score(member)? {
            Some(cur) => {
                if f.nx {
                    continue;
                }
                let mut s = score;
                if f.incr {
                    s += cur;
                    if s.is_nan() {
                        return Err(ERR_NAN);
                    }
                }
                if (f.lt && s >= cur) || (f.gt && s <= cur) {
                    continue;
                }
                newscore = s;
                processed += 1;
                if s != cur {
                    w.put(member, Some(cur), s);
                    updated += 1;
                }
            }
            None if !f.xx => {
                newscore = score;
                processed += 1;
                w.put(member, None, score);
                added += 1;
            }
            None => {}
        }
    }
    w.commit_notify(ctx, if f.incr { "zincr" } else { "zadd" })?;
    if f.incr {
        if processed > 0 {
            // Unnormalised, as Redis replies (ZINCRBY by -0 on a new member gives -0).
            ctx.out.double(newscore);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out.int(if f.ch { added + updated } else { added });
    }
    Ok(())
}

/// ZREM key member [member ...]
pub fn zrem(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let key = &args[1];
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), &[key]);
    let Some(mut w) = ZWriter::open(ctx, key, false)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let mut removed = 0;
    for m in &args[2..] {
        if let Some(s) = w.score(m)? {
            w.remove(m, s);
            removed += 1;
        }
    }
    w.commit_notify(ctx, "zrem")?;
    ctx.out.int(removed);
    Ok(())
}

// ---- Reads of one key ------------------------------------------------------------------------

/// ZCARD key
pub fn zcard<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let len = ctx.read_members(&args[1], Kind::ZSet)?.cardinality();
    ctx.out().int(len as i64);
    Ok(())
}

/// ZCOUNT key min max
pub fn zcount(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let r = ScoreRange::parse(&args[2], &args[3])?;
    let n = match ZSet::read_counted(ctx, &args[1])? {
        Some(z) => z.count_score(&r)?,
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// ZLEXCOUNT key min max
pub fn zlexcount(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let r = LexRange::parse(&args[2], &args[3])?;
    let n = match ZSet::read_counted(ctx, &args[1])? {
        Some(z) => z.count_lex(&r)?,
        None => 0,
    };
    ctx.out.int(n as i64);
    Ok(())
}

/// ZSCORE key member; answered by the hot cache when it holds the set and the member's
/// score (`cache-sets`), also on the I/O thread.
pub fn zscore<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    zmscore_of(ctx, &args[1], &args[2..3], false)
}

/// ZMSCORE key member [member ...]
pub fn zmscore<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    zmscore_of(ctx, &args[1], &args[2..], true)
}

/// The scores of `members` (nil for a non-member), as an array or, for ZSCORE, the one score.
fn zmscore_of<'a, C: KeyReads<'a>>(
    ctx: &mut C,
    key: &[u8],
    members: &[bytes::Bytes],
    array: bool,
) -> Result<(), C::Error> {
    let values = member_values(ctx, key, Kind::ZSet, members)?;
    if array {
        ctx.out().array(values.len());
    }
    for v in values {
        match v.and_then(|v| decode_score(&v)) {
            Some(s) => ctx.out().double(norm(s)),
            None => ctx.out().null(),
        }
    }
    Ok(())
}

fn rank_generic(ctx: &mut Ctx<'_>, args: &Args, rev: bool) -> CmdResult {
    let rank = match ZSet::read_counted(ctx, &args[1])? {
        Some(z) => match z.score(&args[2])? {
            Some(s) => z
                .rank(&args[2], s)?
                .map(|r| if rev { z.len - 1 - r } else { r }),
            None => None,
        },
        None => None,
    };
    match rank {
        Some(r) => ctx.out.int(r as i64),
        None => ctx.out.null(),
    }
    Ok(())
}

/// ZRANK key member
pub fn zrank(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    rank_generic(ctx, args, false)
}

/// ZREVRANK key member
pub fn zrevrank(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    rank_generic(ctx, args, true)
}

// ---- The ZRANGE family -----------------------------------------------------------------------

/// How a range command selects members; `Auto` until an option decides (ZRANGE's BYSCORE and
/// BYLEX), then rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RangeBy {
    Auto,
    Rank,
    Score,
    Lex,
}

/// A parsed range.
enum Query {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

impl Query {
    /// Parses `a` and `b` (already swapped for reverse score and lex ranges).
    fn parse(by: RangeBy, a: &[u8], b: &[u8]) -> Result<Query, CmdError> {
        Ok(match by {
            RangeBy::Score => Query::Score(ScoreRange::parse(a, b)?),
            RangeBy::Lex => Query::Lex(LexRange::parse(a, b)?),
            _ => Query::Rank(
                parse_i64(a).ok_or(CmdError::not_integer())?,
                parse_i64(b).ok_or(CmdError::not_integer())?,
            ),
        })
    }

    /// The members of `z` this range selects, in reply order.
    fn run(&self, z: &ZSet, rev: bool, offset: i64, limit: i64) -> Result<Vec<Item>, CmdError> {
        match self {
            Query::Rank(a, b) => match index_range(*a, *b, z.len) {
                Some((start, end)) => z.by_rank(start, end, rev),
                None => Ok(Vec::new()),
            },
            Query::Score(r) => z.by_score(r, rev, offset, limit),
            Query::Lex(r) => z.by_lex(r, rev, offset, limit),
        }
    }
}

/// The body of every range read and ZRANGESTORE (Redis's `zrangeGenericCommand`): the source
/// key is `args[at]`, min and max follow, then options. `by` and `rev` are fixed by the
/// command, or `Auto` / `None` when ZRANGE's options choose them. With `dst`, the result
/// replaces that key and the reply is its length.
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    args: &Args,
    at: usize,
    dst: Option<&[u8]>,
    mut by: RangeBy,
    mut rev: Option<bool>,
) -> CmdResult {
    let key = &args[at];
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = at + 3;
    while j < args.len() {
        let left = args.len() - j - 1;
        let opt = args[j].to_ascii_uppercase();
        match opt.as_slice() {
            b"WITHSCORES" if dst.is_none() => withscores = true,
            b"LIMIT" if left >= 2 => {
                offset = parse_i64(&args[j + 1]).ok_or(CmdError::not_integer())?;
                limit = parse_i64(&args[j + 2]).ok_or(CmdError::not_integer())?;
                j += 2;
            }
            b"REV" if rev.is_none() => rev = Some(true),
            b"BYLEX" if by == RangeBy::Auto => by = RangeBy::Lex,
            b"BYSCORE" if by == RangeBy::Auto => by = RangeBy::Score,
            _ => return Err(CmdError::syntax()),
        }
        j += 1;
    }
    let rev = rev.unwrap_or(false);
    if by == RangeBy::Auto {
        by = RangeBy::Rank;
    }
    if (offset != 0 || limit != -1) && by == RangeBy::Rank {
        return Err(ERR_LIMIT_RANK);
    }
    if withscores && by == RangeBy::Lex {
        return Err(ERR_WITHSCORES_LEX);
    }
    let (a, b) = if rev && by != RangeBy::Rank {
        (&args[at + 2], &args[at + 1])
    } else {
        (&args[at + 1], &args[at + 2])
    };
    let query = Query::parse(by, a, b)?;
    // ZRANGESTORE reads its source under both keys' locks, so its result is what it stores.
    let _g = dst.map(|dst| ctx.storage().lock(ctx.db(), &[dst, &key[..]]));
    let items = match ZSet::read_counted(ctx, key)? {
        Some(z) => query.run(&z, rev, offset, limit)?,
        None => Vec::new(),
    };
    match dst {
        None => reply_items(ctx.out, &items, withscores),
        Some(dst) => {
            store_result(ctx, dst, &items, "zrangestore")?;
            ctx.out.int(items.len() as i64);
        }
    }
    Ok(())
}

/// ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
pub fn zrange(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeBy::Auto, None)
}

/// ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
pub fn zrangestore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 2, Some(&args[1]), RangeBy::Auto, None)
}

/// ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
pub fn zrangebyscore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeBy::Score, Some(false))
}

/// ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
pub fn zrevrangebyscore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeBy::Score, Some(true))
}

/// ZRANGEBYLEX key min max [LIMIT offset count]
pub fn zrangebylex(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeBy::Lex, Some(false))
}

/// ZREVRANGEBYLEX key max min [LIMIT offset count]
pub fn zrevrangebylex(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeBy::Lex, Some(true))
}

/// ZREVRANGE key start stop [WITHSCORES]
pub fn zrevrange(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zrange_generic(ctx, args, 1, None, RangeBy::Rank, Some(true))
}

/// The body of ZREMRANGEBYRANK/SCORE/LEX: removes the members in the range, replies with how
/// many, deletes the key if it became empty.
fn zremrange_generic(ctx: &mut Ctx<'_>, args: &Args, by: RangeBy) -> CmdResult {
    let query = Query::parse(by, &args[2], &args[3])?;
    let key = &args[1];
    let storage = ctx.storage();
    let _g = storage.lock(ctx.db(), &[key]);
    let Some(mut w) = ZWriter::open(ctx, key, false)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let set = match query {
        Query::Rank(..) => w.current_counted(ctx),
        _ => w.current(),
    };
    let items = query.run(&set, false, 0, -1)?;
    for (m, s) in &items {
        w.remove(m, *s);
    }
    let event = match by {
        RangeBy::Rank => "zremrangebyrank",
        RangeBy::Score => "zremrangebyscore",
        _ => "zremrangebylex",
    };
    w.commit_notify(ctx, event)?;
    ctx.out.int(items.len() as i64);
    Ok(())
}

/// ZREMRANGEBYRANK key start stop
pub fn zremrangebyrank(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zremrange_generic(ctx, args, RangeBy::Rank)
}

/// ZREMRANGEBYSCORE key min max
pub fn zremrangebyscore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zremrange_generic(ctx, args, RangeBy::Score)
}

/// ZREMRANGEBYLEX key min max
pub fn zremrangebylex(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    zremrange_generic(ctx, args, RangeBy::Lex)
}

// ---- ZSCAN ------------------------------------------------------------------------------------

/// Sets up to this size are returned whole by one ZSCAN call with cursor 0, in score order,
/// as Redis does for its listpack encoding (`zset-max-listpack-entries`, default 128).
const SCAN_WHOLE_MAX: u64 = 128;

/// ZSCAN key cursor [MATCH pattern] [COUNT count]
///
/// A set of at most 128 members comes back whole in one call, in score order, cursor 0, as
/// Redis replies for such sets. Larger sets are walked in member order (stable while scores
/// change, so a member present for the whole iteration is returned, as Redis guarantees), COUNT
/// entries per call, by `collection::MemberScan`: each cursor is a number the server maps to the
/// last member visited, and one it never handed out for this key is refused with
/// "ERR invalid cursor". As in Redis, the cursor is checked before the key is looked up and the
/// options after (a missing key answers an empty scan whatever the options).
pub fn zscan(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let cursor = MemberScan::cursor(&args[2])?;
    let Some(z) = ZSet::read(ctx, &args[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let scan = MemberScan::with_options(cursor, args, 2)?;
    let pattern = scan.pattern;
    let mut found: Vec<Item> = Vec::new();
    let next = if z.len <= SCAN_WHOLE_MAX {
        found = z
            .all()?
            .into_iter()
            .filter(|(m, _)| pattern.is_none_or(|p| glob::matches(p, m)))
            .collect();
        0
    } else {
        scan.step(ctx, &z.view, Cf::Data, &z.coll, |m, v| {
            found.push((m.to_vec(), decode_score(v).unwrap_or(0.0)));
        })?
    };
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len() * 2);
    let small = z.len <= SCAN_WHOLE_MAX;
    for (m, s) in &found {
        ctx.out.bulk(m);
        if small {
            ctx.out.bulk(compact_score(*s).as_bytes());
        } else {
            ctx.out.bulk(format_g17(norm(*s)).as_bytes());
        }
    }
    Ok(())
}

/// A score as Redis keeps it in a small (listpack) sorted set, which is what its ZSCAN prints:
/// an integral score within +-(2^63-1)/2 as an integer (-0 as 0), any other as `%.17g`.
fn compact_score(s: f64) -> String {
    const LIMIT: f64 = (i64::MAX / 2) as f64;
    if (-LIMIT..=LIMIT).contains(&s) && s.fract() == 0.0 {
        (s as i64).to_string()
    } else {
        format_g17(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_scores_match_listpack_text() {
        assert_eq!(compact_score(1e18), "1000000000000000000");
        assert_eq!(compact_score(-0.0), "0");
        assert_eq!(compact_score(9.2e18), "9.2e+18");
        assert_eq!(compact_score(i64::MIN as f64), "-9.2233720368547758e+18");
        assert_eq!(compact_score(0.5), "0.5");
        assert_eq!(compact_score(f64::INFINITY), "inf");
    }
}
