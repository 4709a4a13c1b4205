//! ZUNION ZINTER ZDIFF, their STORE forms, and ZINTERCARD (Redis's
//! `zunionInterDiffGenericCommand`).
//!
//! Inputs may be sorted sets or plain sets (every set member scores 1). The order of work follows
//! Redis so sums round alike: union and intersection take the inputs from the smallest to the
//! largest (a stable sort), the intersection walks the smallest input and probes the others with
//! multi-gets, and a weighted score that is NaN (0 * inf) counts as 0, as does a SUM of +inf and
//! -inf. Results come out in score order, ties by member, like Redis's result skiplist.
//!
//! The intersection and the difference walk their first input a chunk at a time, so they hold
//! one chunk of it beside their result; ZINTERCARD's LIMIT stops the walk at the chunk that
//! reaches it, as Redis stops its loop. A key named twice is known to hold every member of
//! itself: it is not probed, ZDIFF of it is empty without a read, and ZINTERCARD of one key
//! however often named is its length (a million-member set counted against itself took 3 s).

use super::{count_lookup, reply_items, store_result, Item};
use crate::cmd::ctx::{Args, CmdError, CmdResult, Ctx};
use crate::storage::encoding::{decode_score, Kind, Meta};
use crate::storage::{Cf, Coll, View};
use kvik_resp::{parse_i64, parse_redis_double};
use std::collections::hash_map::Entry;
use std::collections::HashMap;

const ERR_WEIGHT: CmdError = CmdError::fixed("weight value is not a float");
const ERR_LIMIT: CmdError = CmdError::fixed("LIMIT can't be negative");

/// Members probed per multi-get.
const PROBE_BATCH: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, target: &mut f64, v: f64) {
        match self {
            Aggregate::Sum => {
                *target += v;
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if v < *target {
                    *target = v;
                }
            }
            Aggregate::Max => {
                if v > *target {
                    *target = v;
                }
            }
        }
    }
}

/// One input: a sorted set or a set, or nothing (a missing key).
struct Source<'k> {
    coll: Option<Coll<'k>>,
    kind: Kind,
    len: u64,
    weight: f64,
}

impl Source<'_> {
    fn score_of(&self, value: &[u8]) -> f64 {
        if self.kind == Kind::Set {
            1.0
        } else {
            decode_score(value).unwrap_or(0.0)
        }
    }

    /// Every (member, unweighted score).
    fn items(&self, view: &View) -> Result<Vec<Item>, CmdError> {
        let mut out = Vec::with_capacity(self.len.min(1 << 16) as usize);
        self.for_each_chunk(view, |chunk| {
            out.extend(chunk);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Calls `f` with the (member, unweighted score) pairs in member order, a chunk at a
    /// time (`View::for_each_chunk`), until it returns false.
    fn for_each_chunk(
        &self,
        view: &View,
        f: impl FnMut(Vec<Item>) -> Result<bool, CmdError>,
    ) -> Result<(), CmdError> {
        let Some(coll) = &self.coll else {
            return Ok(());
        };
        let score = |m: &[u8], v: &[u8]| (m.to_vec(), self.score_of(v));
        view.for_each_chunk(Cf::Data, coll, PROBE_BATCH, score, f)
    }

    /// Whether `other` is the same key as this input (named twice in one command): it holds
    /// every member of this one at the same score, so it needs no probe.
    fn same_key(&self, other: &Source) -> bool {
        matches!((&self.coll, &other.coll), (Some(a), Some(b)) if a.key == b.key)
    }

    /// The unweighted scores of `members` (`None` where absent).
    fn probe(&self, view: &View, members: &[&[u8]]) -> Result<Vec<Option<f64>>, CmdError> {
        let Some(coll) = &self.coll else {
            return Ok(vec![None; members.len()]);
        };
        let mut out = Vec::with_capacity(members.len());
        for chunk in members.chunks(PROBE_BATCH) {
            for v in view.get_members(coll, chunk)? {
                out.push(v.map(|v| self.score_of(&v)));
            }
        }
        Ok(out)
    }
}

/// The body of every command of this module. `at` is the index of numkeys; `dst` the STORE
/// destination; `card_only` ZINTERCARD.
fn setop_generic(
    ctx: &mut Ctx<'_>,
    args: &Args,
    at: usize,
    dst: Option<&[u8]>,
    op: SetOp,
    card_only: bool,
) -> CmdResult {
    let numkeys = parse_i64(&args[at]).ok_or(CmdError::not_integer())?;
    if numkeys < 1 {
        return Err(CmdError::err(format_args!(
            "at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&args[0]).to_ascii_lowercase()
        )));
    }
    if numkeys as u64 > (args.len() - at - 1) as u64 {
        return Err(CmdError::syntax());
    }
    let numkeys = numkeys as usize;
    let keys = &args[at + 1..at + 1 + numkeys];
    let storage = ctx.storage();
    let db = ctx.db();
    // STORE forms hold every key's lock (destination included) until the result is written.
    let _g = dst.map(|d| {
        let mut all: Vec<&[u8]> = vec![d];
        all.extend(keys.iter().map(|k| &k[..]));
        storage.lock(db, &all)
    });
    let view = storage.view();
    let mut sources = Vec::with_capacity(numkeys);
    for key in keys {
        let meta: Option<Meta> = view.get_live(db, key, ctx.now_ms)?;
        if dst.is_none() {
            count_lookup(ctx, meta.is_some());
        }
        sources.push(match meta {
            None => Source {
                coll: None,
                kind: Kind::ZSet,
                len: 0,
                weight: 1.0,
            },
            Some(m) if m.kind == Kind::ZSet || m.kind == Kind::Set => Source {
                coll: Some(Coll::new(db, key, &m)),
                kind: m.kind,
                len: m.len,
                weight: 1.0,
            },
            Some(_) => return Err(CmdError::wrong_type()),
        });
    }
    // Options, after the type checks (as in Redis).
    let mut aggregate = Aggregate::Sum;
    let mut withscores = false;
    let mut limit: u64 = 0;
    let mut j = at + 1 + numkeys;
    while j < args.len() {
        let remaining = args.len() - j;
        let opt = args[j].to_ascii_uppercase();
        let mixing = op != SetOp::Diff && !card_only;
        match opt.as_slice() {
            b"WEIGHTS" if mixing && remaining > numkeys => {
                for (i, s) in sources.iter_mut().enumerate() {
                    s.weight = parse_redis_double(&args[j + 1 + i]).ok_or(ERR_WEIGHT)?;
                }
                j += 1 + numkeys;
            }
            b"AGGREGATE" if mixing && remaining >= 2 => {
                aggregate = match args[j + 1].to_ascii_uppercase().as_slice() {
                    b"SUM" => Aggregate::Sum,
                    b"MIN" => Aggregate::Min,
                    b"MAX" => Aggregate::Max,
                    _ => return Err(CmdError::syntax()),
                };
                j += 2;
            }
            b"WITHSCORES" if dst.is_none() && !card_only => {
                withscores = true;
                j += 1;
            }
            b"LIMIT" if card_only && remaining >= 2 => {
                limit = parse_i64(&args[j + 1])
                    .ok_or(ERR_LIMIT)
                    .and_then(|n| u64::try_from(n).map_err(|_| ERR_LIMIT))?;
                j += 2;
            }
            _ => return Err(CmdError::syntax()),
        }
    }
    if card_only {
        let (n, _) = inter(&view, sources, aggregate, true, limit)?;
        ctx.out.int(n as i64);
        return Ok(());
    }
    let mut items = match op {
        SetOp::Union => union(&view, sources, aggregate)?,
        SetOp::Inter => inter(&view, sources, aggregate, false, 0)?.1,
        SetOp::Diff => diff(&view, &sources)?,
    };
    // -0 and 0 tie (compared by member), as in Redis's skiplist; no score is NaN here.
    items.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
    match dst {
        Some(d) => {
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            store_result(ctx, d, &items, event)?;
            ctx.out.int(items.len() as i64);
        }
        None => reply_items(ctx.out, &items, withscores),
    }
    Ok(())
}

/// `score * weight`, with NaN (0 * inf) read as 0.
fn weighted(score: f64, weight: f64) -> f64 {
    let v = score * weight;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

fn union(view: &View, mut sources: Vec<Source>, agg: Aggregate) -> Result<Vec<Item>, CmdError> {
    sources.sort_by_key(|s| s.len);
    let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
    for src in &sources {
        for (m, s) in src.items(view)? {
            let v = weighted(s, src.weight);
            match acc.entry(m) {
                Entry::Vacant(e) => {
                    e.insert(v);
                }
                Entry::Occupied(mut e) => agg.apply(e.get_mut(), v),
            }
        }
    }
    Ok(acc.into_iter().collect())
}

/// The intersection, walking the smallest input a chunk at a time and probing the others with
/// its members. `limit` (ZINTERCARD's LIMIT, 0 = none) stops the walk once that many members
/// are found; a count returns no members. An input named again beside the smallest one is not
/// probed (its scores are the chunk's own), and a count of one key named any number of times
/// is its length, read from nothing but the meta record.
fn inter(
    view: &View,
    mut sources: Vec<Source>,
    agg: Aggregate,
    card_only: bool,
    limit: u64,
) -> Result<(u64, Vec<Item>), CmdError> {
    sources.sort_by_key(|s| s.len);
    let Some((first, others)) = sources.split_first() else {
        return Ok((0, Vec::new()));
    };
    if first.len == 0 {
        return Ok((0, Vec::new()));
    }
    if card_only && others.iter().all(|o| o.same_key(first)) {
        return Ok((capped(first.len, limit), Vec::new()));
    }
    let mut n = 0u64;
    let mut out = Vec::new();
    first.for_each_chunk(view, |chunk| {
        // (member, the first input's unweighted score, the aggregate so far)
        let mut acc: Vec<(Vec<u8>, f64, f64)> = chunk
            .into_iter()
            .map(|(m, s)| (m, s, weighted(s, first.weight)))
            .collect();
        for src in others {
            if acc.is_empty() {
                break;
            }
            if src.same_key(first) {
                if !card_only {
                    for (_, own, score) in &mut acc {
                        agg.apply(score, *own * src.weight);
                    }
                }
                continue;
            }
            let members: Vec<&[u8]> = acc.iter().map(|(m, _, _)| m.as_slice()).collect();
            let found = src.probe(view, &members)?;
            let mut kept = Vec::with_capacity(acc.len());
            for ((m, own, mut score), f) in acc.into_iter().zip(found) {
                if let Some(s) = f {
                    if !card_only {
                        agg.apply(&mut score, s * src.weight);
                    }
                    kept.push((m, own, score));
                }
            }
            acc = kept;
        }
        n += acc.len() as u64;
        if !card_only {
            out.extend(acc.into_iter().map(|(m, _, score)| (m, score)));
        }
        Ok(limit == 0 || n < limit)
    })?;
    Ok((capped(n, limit), out))
}

/// A count cut at `limit` (0 = no limit).
fn capped(n: u64, limit: u64) -> u64 {
    if limit > 0 {
        n.min(limit)
    } else {
        n
    }
}

/// The members of the first input that are in none of the others, walking the first a chunk at
/// a time; empty at once if the first is named again.
fn diff(view: &View, sources: &[Source]) -> Result<Vec<Item>, CmdError> {
    let Some((first, others)) = sources.split_first() else {
        return Ok(Vec::new());
    };
    if others.iter().any(|o| o.same_key(first)) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    first.for_each_chunk(view, |mut chunk| {
        for src in others {
            if chunk.is_empty() {
                break;
            }
            if src.len == 0 {
                continue;
            }
            let members: Vec<&[u8]> = chunk.iter().map(|(m, _)| m.as_slice()).collect();
            let found = src.probe(view, &members)?;
            let mut it = found.iter();
            chunk.retain(|_| it.next().is_some_and(|f| f.is_none()));
        }
        out.extend(chunk);
        Ok(true)
    })?;
    Ok(out)
}

/// ZUNION numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zunion(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 1, None, SetOp::Union, false)
}

/// ZINTER numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
pub fn zinter(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 1, None, SetOp::Inter, false)
}

/// ZDIFF numkeys key [key ...] [WITHSCORES]
pub fn zdiff(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 1, None, SetOp::Diff, false)
}

/// ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
pub fn zunionstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 2, Some(&args[1]), SetOp::Union, false)
}

/// ZINTERSTORE destination numkeys key [key ...] [WEIGHTS weight ...] [AGGREGATE SUM|MIN|MAX]
pub fn zinterstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 2, Some(&args[1]), SetOp::Inter, false)
}

/// ZDIFFSTORE destination numkeys key [key ...]
pub fn zdiffstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 2, Some(&args[1]), SetOp::Diff, false)
}

/// ZINTERCARD numkeys key [key ...] [LIMIT limit]
pub fn zintercard(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    setop_generic(ctx, args, 1, None, SetOp::Inter, true)
}
