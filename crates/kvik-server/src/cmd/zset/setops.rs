//! ZUNION ZINTER ZDIFF, their STORE forms, and ZINTERCARD (Redis's
//! `zunionInterDiffGenericCommand`).
//!
//! Inputs may be sorted sets or plain sets (every set member scores 1). The order of work follows
//! Redis so sums round alike: union and intersection take the inputs from the smallest to the
//! largest (a stable sort), the intersection walks the smallest input and probes the others with
//! multi-gets, and a weighted score that is NaN (0 * inf) counts as 0, as does a SUM of +inf and
//! -inf. Results come out in score order, ties by member, like Redis's result skiplist.

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
        if let Some(coll) = &self.coll {
            view.for_each_member(Cf::Data, coll, |m, v| {
                out.push((m.to_vec(), self.score_of(v)));
                true
            })?;
        }
        Ok(out)
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
    let mut items = match op {
        SetOp::Union => union(&view, sources, aggregate)?,
        SetOp::Inter => inter(&view, sources, aggregate, card_only)?,
        SetOp::Diff => diff(&view, &sources)?,
    };
    if card_only {
        let n = items.len() as u64;
        ctx.out.int(if limit > 0 { n.min(limit) } else { n } as i64);
        return Ok(());
    }
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

fn inter(
    view: &View,
    mut sources: Vec<Source>,
    agg: Aggregate,
    card_only: bool,
) -> Result<Vec<Item>, CmdError> {
    sources.sort_by_key(|s| s.len);
    if sources.first().is_none_or(|s| s.len == 0) {
        return Ok(Vec::new());
    }
    let first = &sources[0];
    let mut acc: Vec<Item> = first
        .items(view)?
        .into_iter()
        .map(|(m, s)| (m, weighted(s, first.weight)))
        .collect();
    for src in &sources[1..] {
        if acc.is_empty() {
            break;
        }
        let members: Vec<&[u8]> = acc.iter().map(|(m, _)| m.as_slice()).collect();
        let found = src.probe(view, &members)?;
        let mut kept = Vec::with_capacity(acc.len());
        for ((m, mut score), f) in acc.into_iter().zip(found) {
            if let Some(s) = f {
                if !card_only {
                    agg.apply(&mut score, s * src.weight);
                }
                kept.push((m, score));
            }
        }
        acc = kept;
    }
    Ok(acc)
}

fn diff(view: &View, sources: &[Source]) -> Result<Vec<Item>, CmdError> {
    let Some(first) = sources.first() else {
        return Ok(Vec::new());
    };
    let mut acc = first.items(view)?;
    for src in &sources[1..] {
        if acc.is_empty() {
            break;
        }
        if src.len == 0 {
            continue;
        }
        let members: Vec<&[u8]> = acc.iter().map(|(m, _)| m.as_slice()).collect();
        let found = src.probe(view, &members)?;
        acc = acc
            .into_iter()
            .zip(found)
            .filter(|(_, f)| f.is_none())
            .map(|(item, _)| item)
            .collect();
    }
    Ok(acc)
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
