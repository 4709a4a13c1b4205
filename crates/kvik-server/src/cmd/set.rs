//! Set commands: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SMOVE SINTER
//! SINTERCARD SINTERSTORE SUNION SUNIONSTORE SDIFF SDIFFSTORE SSCAN.
//!
//! A set is a meta record (kind, expiry, version, number of members) plus one data-CF entry per
//! member with an empty value. Single-key writes go through [`CollWrite`] (key lock, one batch,
//! meta put or delete). SMOVE and the STORE commands lock every key they touch at once; a STORE
//! writes its result under a fresh version (the old destination, of any type, is dropped in O(1))
//! and deletes the destination when the result is empty.
//!
//! Intersections walk the smallest set and test its members against the others with batched
//! point reads; unions merge into an ordered set; replies list members in storage (byte) order,
//! where Redis's order is its hash table's and unspecified.

use super::cached::{member_values, KeyReads};
use super::collection::{
    self, deck_or_ranked_picks, notify_write, put_or_delete_meta, CollWrite, MemberScan, Sampler,
    ERR_OUT_OF_RANGE, IO_THREAD_MAX_POP, SMALL_SAMPLE,
};
use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::hash::parse_count;
use super::ranked;
use super::spec::{numkeys_at_1, CacheEffect, Class, CommandSpec, Flags, KeySpec};
use crate::storage::encoding::{Kind, Meta};
use crate::storage::pop_decks::MAX_DECK_MEMBERS;
use crate::storage::{Batch, Cf, Coll, View};
use std::collections::{BTreeSet, HashSet};

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WRITE_OOM_FAST: Flags = WRITE_OOM.union(Flags::FAST);

const ACL_READ_FAST: &[&str] = &["read", "set", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "set", "slow"];
const ACL_WRITE_FAST: &[&str] = &["write", "set", "fast"];
const ACL_WRITE_SLOW: &[&str] = &["write", "set", "slow"];

const INTER: &str = "O(N*M) worst case where N is the cardinality of the smallest set and M is \
                     the number of sets.";
const UNION: &str = "O(N) where N is the total number of elements in all given sets.";
const DIFF: &str = "O(N) where N is the total number of elements in all given sets.";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sadd", -3, WRITE_OOM_FAST, KeySpec::ONE, sadd)
        .rtc_write()
        .event(Class::Set, "sadd")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("set")
        .doc(
            "Adds one or more members to a set. Creates the key if it doesn't exist.",
            "1.0.0",
            "O(1) for each element added, so O(N) to add N elements when the command is called \
             with multiple arguments.",
        ),
    CommandSpec::new("srem", -3, WRITE_FAST, KeySpec::ONE, srem)
        .rtc_write()
        .event(Class::Set, "srem")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("set")
        .doc(
            "Removes one or more members from a set. Deletes the set if the last member was \
             removed.",
            "1.0.0",
            "O(N) where N is the number of members to be removed.",
        ),
    CommandSpec::new("smembers", 2, READ, KeySpec::ONE, smembers)
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc(
            "Returns all members of a set.",
            "1.0.0",
            "O(N) where N is the set cardinality.",
        ),
    CommandSpec::new("sismember", 3, READ_FAST, KeySpec::ONE, |c, a| {
        sismember(c, a)
    })
    .rtc(|c, a| sismember(c, a))
    .acl(ACL_READ_FAST)
    .group("set")
    .doc(
        "Determines whether a member belongs to a set.",
        "1.0.0",
        "O(1)",
    ),
    CommandSpec::new("smismember", -3, READ_FAST, KeySpec::ONE, |c, a| {
        smismember(c, a)
    })
    .rtc(|c, a| smismember(c, a))
    .acl(ACL_READ_FAST)
    .group("set")
    .doc(
        "Determines whether multiple members belong to a set.",
        "6.2.0",
        "O(N) where N is the number of elements being checked for membership",
    ),
    CommandSpec::new("scard", 2, READ_FAST, KeySpec::ONE, |c, a| scard(c, a))
        .rtc(|c, a| scard(c, a))
        .acl(ACL_READ_FAST)
        .group("set")
        .doc("Returns the number of members in a set.", "1.0.0", "O(1)"),
    CommandSpec::new("spop", -2, WRITE_FAST, KeySpec::ONE, spop)
        .rtc_write()
        .event(Class::Set, "spop")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("set")
        .doc(
            "Returns one or more random members from a set after removing them. Deletes the set \
             if the last member was popped.",
            "1.0.0",
            "Without the count argument O(1), otherwise O(N) where N is the value of the passed \
             count.",
        ),
    CommandSpec::new("srandmember", -2, READ, KeySpec::ONE, srandmember)
        .rtc_nowait_read()
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc(
            "Get one or multiple random members from a set",
            "1.0.0",
            "Without the count argument O(1), otherwise O(N) where N is the absolute value of \
             the passed count.",
        ),
    CommandSpec::new("smove", 4, WRITE_FAST, KeySpec::TWO, smove)
        .event(Class::Set, "srem")
        .event(Class::Set, "sadd")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_FAST)
        .group("set")
        .doc("Moves a member from one set to another.", "1.0.0", "O(1)"),
    CommandSpec::new("sinter", -2, READ, KeySpec::ALL, sinter)
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc("Returns the intersect of multiple sets.", "1.0.0", INTER),
    CommandSpec::new("sintercard", -3, READ, KeySpec::NONE, sintercard)
        .movable(numkeys_at_1)
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc(
            "Returns the number of members of the intersect of multiple sets.",
            "7.0.0",
            INTER,
        ),
    CommandSpec::new("sinterstore", -3, WRITE_OOM, KeySpec::ALL, sinterstore)
        .event(Class::Set, "sinterstore")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_SLOW)
        .group("set")
        .doc(
            "Stores the intersect of multiple sets in a key.",
            "1.0.0",
            INTER,
        ),
    CommandSpec::new("sunion", -2, READ, KeySpec::ALL, sunion)
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc("Returns the union of multiple sets.", "1.0.0", UNION),
    CommandSpec::new("sunionstore", -3, WRITE_OOM, KeySpec::ALL, sunionstore)
        .event(Class::Set, "sunionstore")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_SLOW)
        .group("set")
        .doc(
            "Stores the union of multiple sets in a key.",
            "1.0.0",
            UNION,
        ),
    CommandSpec::new("sdiff", -2, READ, KeySpec::ALL, sdiff)
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc("Returns the difference of multiple sets.", "1.0.0", DIFF),
    CommandSpec::new("sdiffstore", -3, WRITE_OOM, KeySpec::ALL, sdiffstore)
        .event(Class::Set, "sdiffstore")
        .event(Class::Generic, "del")
        .cache(CacheEffect::Invalidate)
        .acl(ACL_WRITE_SLOW)
        .group("set")
        .doc(
            "Stores the difference of multiple sets in a key.",
            "1.0.0",
            DIFF,
        ),
    CommandSpec::new("sscan", -3, READ, KeySpec::ONE, sscan)
        .acl(ACL_READ_SLOW)
        .group("set")
        .doc(
            "Iterates over members of a set.",
            "2.0.0",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls \
             for the cursor to return back to 0. N is the number of elements inside the \
             collection.",
        ),
];

const ERR_POP_COUNT: CmdError = CmdError::fixed("value is out of range, must be positive");
const ERR_NUMKEYS: CmdError = CmdError::fixed("numkeys should be greater than 0");
const ERR_NUMKEYS_ARGS: CmdError =
    CmdError::fixed("Number of keys can't be greater than number of args");
const ERR_LIMIT: CmdError = CmdError::fixed("LIMIT can't be negative");

/// Members tested against the other sets per batched read.
const CHUNK: usize = 256;

// ---- Single-key writes ----------------------------------------------------------------------

/// SADD key member [member ...]: the number of members added.
fn sadd(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut w = CollWrite::open(ctx, &args[1], Kind::Set)?;
    let members = &args[2..];
    let there = w.contains_many(members)?;
    let mut seen = HashSet::new();
    let mut added = 0;
    for (m, &there) in members.iter().zip(&there) {
        if !there && seen.insert(&m[..]) {
            w.put(m, b"", true)?;
            added += 1;
        }
    }
    w.commit_notify(ctx, Class::Set, "sadd")?;
    ctx.out.int(added);
    Ok(())
}

/// SREM key member [member ...]: the number of members removed; the key goes with its last one.
fn srem(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let mut w = CollWrite::open(ctx, &args[1], Kind::Set)?;
    let members = &args[2..];
    let there = w.contains_many(members)?;
    let mut seen = HashSet::new();
    let mut removed = 0;
    for (m, &there) in members.iter().zip(&there) {
        if there && seen.insert(&m[..]) {
            w.delete(m);
            removed += 1;
        }
    }
    w.commit_notify(ctx, Class::Set, "srem")?;
    ctx.out.int(removed);
    Ok(())
}

/// SPOP key [count]: one random member (nil if none), or a set of up to `count` distinct ones;
/// the popped members are removed, and the key with the last of them.
fn spop(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::syntax());
    }
    let count = match args.get(2) {
        Some(a) => Some(
            kvik_resp::parse_i64(a)
                .filter(|n| *n >= 0)
                .ok_or(ERR_POP_COUNT)? as u64,
        ),
        None => None,
    };
    let mut w = CollWrite::open(ctx, &args[1], Kind::Set)?;
    let Some(count) = count else {
        let picked = match w.coll() {
            Some(coll) => pick_to_pop(ctx, &mut w, coll, 1)?.pop(),
            None => None,
        };
        if let Some(m) = &picked {
            w.delete(m);
            w.commit_notify(ctx, Class::Set, "spop")?;
        }
        ctx.out.bulk_or_null(picked.as_deref());
        return Ok(());
    };
    let Some(coll) = w.coll().filter(|_| count > 0) else {
        ctx.out.set(0);
        return Ok(());
    };
    if !w.may_wait() && count.min(w.len()) > IO_THREAD_MAX_POP {
        return Err(CmdError::WOULD_BLOCK);
    }
    if count >= w.len() {
        // Everything: reply with all members and drop the set in O(1) (a meta delete).
        let view = w.view();
        ctx.out.set(w.len() as usize);
        let out = &mut *ctx.out;
        view.for_each_member(Cf::Data, &coll, |m, _| {
            out.bulk(m);
            true
        })?;
        drop(view);
        w.clear();
        w.commit_notify(ctx, Class::Set, "spop")?;
        return Ok(());
    }
    let picks = pick_to_pop(ctx, &mut w, coll, count)?;
    for m in &picks {
        w.delete(m);
    }
    w.commit_notify(ctx, Class::Set, "spop")?;
    ctx.out.set(picks.len());
    for m in &picks {
        ctx.out.bulk(m);
    }
    Ok(())
}

/// `count` (at most the set's length) distinct random members of the set `w` writes, for
/// SPOP: taken from the set's deck (`storage::pop_decks`), dealt by one pass over the set
/// when it has none, so a set emptied by SPOP is read once rather than walked for every pop.
/// A set too big for a deck is drawn from by random ranks through its rank index
/// (`cmd::ranked`), else sampled by walks. A transaction rolled back after the deck
/// gave its cards drops the decks (`Storage::forget_pop_notes`). On an I/O thread, dealing
/// or walking a set of more than [`SMALL_SAMPLE`] members is left to a worker (WouldBlock).
fn pick_to_pop(
    ctx: &Ctx<'_>,
    w: &mut CollWrite<'_, '_>,
    coll: Coll<'_>,
    count: u64,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let storage = w.storage;
    if w.len() > MAX_DECK_MEMBERS {
        if !w.may_wait() && w.len() > SMALL_SAMPLE {
            return Err(CmdError::WOULD_BLOCK);
        }
        if let Some(picks) = ranked::held_picks(ctx, w, count)? {
            return Ok(picks.into_iter().map(|(m, _)| m).collect());
        }
        let view = w.view();
        let picks = Sampler::new(&view, Cf::Data, coll, w.len()).distinct(count)?;
        return Ok(picks.into_iter().map(|(m, _)| m).collect());
    }
    let decks = storage.pop_decks();
    let prefix = coll.prefix();
    let mut picks: Vec<Vec<u8>> = Vec::with_capacity(count.min(1024) as usize);
    if let Err(e) = take_from_deck(w, coll, &prefix, count, &mut picks) {
        // Not known from memory (an I/O thread): the cards taken stay in the deck, in their
        // places, for the worker that runs the command again.
        for p in picks.into_iter().rev() {
            decks.put_back(&prefix, p);
        }
        return Err(e);
    }
    Ok(picks)
}

/// [`pick_to_pop`]'s deck: appends to `picks` cards that are members still, dealing the deck
/// (once) when there is none or it runs out; a sample fills up what a set whose members are
/// too big to deal cannot.
fn take_from_deck(
    w: &mut CollWrite<'_, '_>,
    coll: Coll<'_>,
    prefix: &[u8],
    count: u64,
    picks: &mut Vec<Vec<u8>>,
) -> Result<(), CmdError> {
    let decks = w.storage.pop_decks();
    // The picks so far, to pass over a card met twice (a member removed and added again).
    let mut picked: HashSet<Vec<u8>> = HashSet::new();
    let mut dealt = false;
    while (picks.len() as u64) < count {
        match decks.take(prefix) {
            Some(card) => {
                if picked.contains(&card) {
                    continue;
                }
                match w.contains_many(&[&card]) {
                    Ok(found) if !found[0] => continue,
                    Ok(_) => {}
                    Err(e) => {
                        decks.put_back(prefix, card);
                        return Err(e);
                    }
                }
                if count > 1 {
                    picked.insert(card.clone());
                }
                picks.push(card);
            }
            None if !dealt => {
                if !w.may_wait() && w.len() > SMALL_SAMPLE {
                    return Err(CmdError::WOULD_BLOCK);
                }
                dealt = true;
                let mut cards = Vec::with_capacity(w.len() as usize);
                w.view().for_each_member(Cf::Data, &coll, |m, _| {
                    if !picked.contains(m) {
                        cards.push(m.to_vec());
                    }
                    true
                })?;
                if !decks.deal(prefix.to_vec(), coll.version, cards) {
                    let view = w.view();
                    let sample = Sampler::new(&view, Cf::Data, coll, w.len()).distinct(count)?;
                    for (m, _) in sample {
                        if (picks.len() as u64) < count && !picked.contains(&m) {
                            picks.push(m);
                        }
                    }
                    return Ok(());
                }
            }
            None => return Ok(()),
        }
    }
    Ok(())
}

// ---- Single-key reads -----------------------------------------------------------------------

/// SMEMBERS key: every member (a set in RESP3).
fn smembers(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some((view, meta)) = ctx.read_collection(&args[1], Kind::Set)? else {
        ctx.out.set(0);
        return Ok(());
    };
    let coll = Coll::new(ctx.db(), &args[1], &meta);
    ctx.out.set(meta.len as usize);
    let out = &mut *ctx.out;
    let mut n = 0u64;
    view.for_each_member(Cf::Data, &coll, |m, _| {
        out.bulk(m);
        n += 1;
        true
    })?;
    if n != meta.len {
        return Err(CmdError::err(format_args!(
            "set length mismatch: {} members stored, {} recorded",
            n, meta.len
        )));
    }
    Ok(())
}

/// SISMEMBER key member: 1 or 0; answered by the hot cache when it holds the set and the
/// member's state (`cache-sets`), also on the I/O thread.
fn sismember<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let found = member_values(ctx, &args[1], Kind::Set, &args[2..3])?;
    ctx.out().int(i64::from(found[0].is_some()));
    Ok(())
}

/// SMISMEMBER key member [member ...]: 1 or 0 per member.
fn smismember<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let found = member_values(ctx, &args[1], Kind::Set, &args[2..])?;
    ctx.out().array(found.len());
    for f in &found {
        ctx.out().int(i64::from(f.is_some()));
    }
    Ok(())
}

/// SCARD key: the number of members, 0 if the key does not exist.
fn scard<'a, C: KeyReads<'a>>(ctx: &mut C, args: &Args) -> Result<(), C::Error> {
    let len = ctx.read_members(&args[1], Kind::Set)?.cardinality();
    ctx.out().int(len as i64);
    Ok(())
}

/// SRANDMEMBER key [count]: one random member (nil if none); with a positive count up to that
/// many distinct members, with a negative count that many picks that may repeat. Drawn from
/// the set's deck (`storage::pop_decks`) where it can, else by random ranks through its rank
/// index (`cmd::ranked`), else sampled by walks.
fn srandmember(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::syntax());
    }
    let Some(count_arg) = args.get(2) else {
        let member = match ctx.read_collection(&args[1], Kind::Set)? {
            Some((view, meta)) => {
                let coll = Coll::new(ctx.db(), &args[1], &meta);
                match deck_or_ranked_picks(ctx, &view, coll, Kind::Set, meta.len, 1, true)? {
                    Some(mut picks) => picks.pop().map(|(m, _)| m),
                    None => Sampler::new(&view, Cf::Data, coll, meta.len)
                        .one()?
                        .map(|(m, _)| m),
                }
            }
            None => None,
        };
        ctx.out.bulk_or_null(member.as_deref());
        return Ok(());
    };
    let count = parse_count(count_arg)?;
    let Some((view, meta)) = ctx.read_collection(&args[1], Kind::Set)? else {
        ctx.out.array(0);
        return Ok(());
    };
    let coll = Coll::new(ctx.db(), &args[1], &meta);
    let n = count.unsigned_abs();
    let from_deck = deck_or_ranked_picks(ctx, &view, coll, Kind::Set, meta.len, n, count >= 0)?;
    let sampler = Sampler::new(&view, Cf::Data, coll, meta.len);
    if count >= 0 {
        let picks = sampler.distinct_or(from_deck, n)?;
        ctx.out.array(picks.len());
        for (m, _) in &picks {
            ctx.out.bulk(m);
        }
        return Ok(());
    }
    let limit = collection::max_reply_bytes(ctx);
    // Each pick costs at least 7 bytes of reply ("$1\r\nx\r\n"): refuse what cannot fit.
    if n.saturating_mul(7) > limit {
        return Err(ERR_OUT_OF_RANGE);
    }
    ctx.out.array(n as usize);
    let start = ctx.out.buf.len() as u64;
    let out = &mut *ctx.out;
    let mut too_big = false;
    sampler.with_repeats_or(from_deck, n, |m, _| {
        out.bulk(m);
        too_big = out.buf.len() as u64 - start > limit;
        !too_big
    })?;
    if too_big {
        return Err(ERR_OUT_OF_RANGE);
    }
    Ok(())
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]: the next cursor and members.
fn sscan(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let cursor = MemberScan::cursor(&args[2])?;
    let Some((view, meta)) = ctx.read_collection(&args[1], Kind::Set)? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let scan = MemberScan::with_options(cursor, args, 2)?;
    let coll = Coll::new(ctx.db(), &args[1], &meta);
    let mut found: Vec<Vec<u8>> = Vec::new();
    let next = scan.step(ctx, &view, Cf::Data, &coll, |m, _| found.push(m.to_vec()))?;
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len());
    for m in &found {
        ctx.out.bulk(m);
    }
    Ok(())
}

// ---- SMOVE ------------------------------------------------------------------------------------

/// SMOVE source destination member: 1 if the member moved, 0 if it was not in the source.
fn smove(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let (src, dst, member) = (&args[1][..], &args[2][..], &args[3][..]);
    let storage = ctx.storage();
    let db = ctx.db();
    let _g = storage.lock(db, &[src, dst]);
    let src_meta = ctx.lookup_write(src)?;
    let dst_meta = ctx.lookup_write(dst)?;
    let Some(mut src_meta) = src_meta else {
        ctx.out.int(0);
        return Ok(());
    };
    if src_meta.kind != Kind::Set || dst_meta.as_ref().is_some_and(|m| m.kind != Kind::Set) {
        return Err(CmdError::wrong_type());
    }
    let view = storage.latest();
    let src_coll = Coll::new(db, src, &src_meta);
    let present = view.get_member(&src_coll, member)?.is_some();
    if src == dst || !present {
        ctx.out.int(i64::from(present && src == dst));
        return Ok(());
    }
    let mut batch = Batch::default();
    batch.delete_member(storage, Cf::Data, &src_coll, member);
    src_meta.len -= 1;
    put_or_delete_meta(&mut batch, storage, db, src, &src_meta);
    let mut dst_meta = match dst_meta {
        Some(m) => m,
        None => Meta::collection(Kind::Set, storage.next_version()?, 0),
    };
    let dst_coll = Coll::new(db, dst, &dst_meta);
    let added = view.get_member(&dst_coll, member)?.is_none();
    if added {
        dst_meta.len += 1;
    }
    batch.put_member(storage, Cf::Data, &dst_coll, member, b"");
    batch.put_meta(storage, db, dst, &dst_meta);
    storage.commit(batch)?;
    notify_write(ctx, Class::Set, "srem", src, src_meta.len == 0);
    if added {
        ctx.notify(Class::Set, "sadd", dst);
    }
    ctx.out.int(1);
    Ok(())
}

// ---- Intersections, unions, differences -------------------------------------------------------

/// One source set of an algebra command: its key, and its view and meta if it exists.
struct Source<'a, 'k> {
    key: &'k [u8],
    found: Option<(View<'a>, Meta)>,
}

impl Source<'_, '_> {
    fn len(&self) -> u64 {
        self.found.as_ref().map_or(0, |(_, m)| m.len)
    }
}

/// Reads the source sets for a reply: each key counts a keyspace hit or miss, and any key that
/// is not a set gives WRONGTYPE (even after a missing one, as Redis checks them all).
fn read_sources<'a, 'k>(
    ctx: &Ctx<'a>,
    keys: &'k [bytes::Bytes],
) -> Result<Vec<Source<'a, 'k>>, CmdError> {
    keys.iter()
        .map(|k| {
            Ok(Source {
                key: k,
                found: ctx.read_collection(k, Kind::Set)?,
            })
        })
        .collect()
}

/// Reads the source sets for a STORE command (the caller holds all their locks).
fn write_sources<'a, 'k>(
    ctx: &Ctx<'a>,
    keys: &'k [bytes::Bytes],
) -> Result<Vec<Source<'a, 'k>>, CmdError> {
    let storage = ctx.storage();
    keys.iter()
        .map(|k| {
            Ok(Source {
                key: k,
                found: ctx
                    .write_collection(k, Kind::Set)?
                    .map(|m| (storage.latest(), m)),
            })
        })
        .collect()
}

/// Calls `f` with the members of `src` a chunk at a time (`View::for_each_chunk`), until it
/// returns false.
fn for_each_chunk(
    db: u16,
    src: &Source<'_, '_>,
    f: impl FnMut(Vec<Vec<u8>>) -> Result<bool, CmdError>,
) -> Result<(), CmdError> {
    let Some((view, meta)) = &src.found else {
        return Ok(());
    };
    let coll = Coll::new(db, src.key, meta);
    view.for_each_chunk(Cf::Data, &coll, CHUNK, |m, _| m.to_vec(), f)
}

/// For each of `members`, whether it is in `src`.
fn contains(db: u16, src: &Source<'_, '_>, members: &[Vec<u8>]) -> Result<Vec<bool>, CmdError> {
    let Some((view, meta)) = &src.found else {
        return Ok(vec![false; members.len()]);
    };
    let coll = Coll::new(db, src.key, meta);
    Ok(view
        .get_members(&coll, members)?
        .into_iter()
        .map(|v| v.is_some())
        .collect())
}

/// The intersection of `sources`, stopping once `limit` members are found (0 = no limit): its
/// size, and its members if `keep` (SINTERCARD only counts, so it holds no members, and counts
/// one key named any number of times by its length alone).
fn intersect(
    db: u16,
    sources: &[Source<'_, '_>],
    limit: u64,
    keep: bool,
) -> Result<(u64, Vec<Vec<u8>>), CmdError> {
    let mut out = Vec::new();
    let mut n = 0u64;
    if sources.iter().any(|s| s.found.is_none()) {
        return Ok((0, out));
    }
    let mut order: Vec<&Source> = sources.iter().collect();
    order.sort_by_key(|s| s.len());
    let (smallest, others) = order.split_first().expect("at least one key");
    if !keep && others.iter().all(|o| o.key == smallest.key) {
        // One set, however often named: its size is in its meta record.
        let n = smallest.len();
        return Ok((if limit > 0 { n.min(limit) } else { n }, out));
    }
    for_each_chunk(db, smallest, |mut chunk| {
        for other in others {
            if other.key == smallest.key {
                continue;
            }
            let keep = contains(db, other, &chunk)?;
            let mut it = keep.iter();
            chunk.retain(|_| *it.next().unwrap_or(&false));
            if chunk.is_empty() {
                break;
            }
        }
        for m in chunk {
            n += 1;
            if keep {
                out.push(m);
            }
            if limit > 0 && n >= limit {
                return Ok(false);
            }
        }
        Ok(true)
    })?;
    Ok((n, out))
}

/// The union of `sources`, in member order.
fn union(db: u16, sources: &[Source<'_, '_>]) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut all = BTreeSet::new();
    for src in sources {
        for_each_chunk(db, src, |chunk| {
            all.extend(chunk);
            Ok(true)
        })?;
    }
    Ok(all.into_iter().collect())
}

/// The members of the first source that are in none of the others; empty at once if the first
/// is named again.
fn difference(db: u16, sources: &[Source<'_, '_>]) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut out = Vec::new();
    let (first, others) = sources.split_first().expect("at least one key");
    if others.iter().any(|o| o.key == first.key) {
        return Ok(out);
    }
    for_each_chunk(db, first, |mut chunk| {
        for other in others {
            if other.found.is_none() {
                continue;
            }
            let drop = contains(db, other, &chunk)?;
            let mut it = drop.iter();
            chunk.retain(|_| !*it.next().unwrap_or(&false));
            if chunk.is_empty() {
                break;
            }
        }
        out.extend(chunk);
        Ok(true)
    })?;
    Ok(out)
}

#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

fn compute(db: u16, op: Op, sources: &[Source<'_, '_>]) -> Result<Vec<Vec<u8>>, CmdError> {
    match op {
        Op::Inter => Ok(intersect(db, sources, 0, true)?.1),
        Op::Union => union(db, sources),
        Op::Diff => difference(db, sources),
    }
}

/// SINTER / SUNION / SDIFF: the resulting members (a set in RESP3).
fn algebra(ctx: &mut Ctx<'_>, args: &Args, op: Op) -> CmdResult {
    let sources = read_sources(ctx, &args[1..])?;
    let members = compute(ctx.db(), op, &sources)?;
    drop(sources);
    ctx.out.set(members.len());
    for m in &members {
        ctx.out.bulk(m);
    }
    Ok(())
}

/// SINTERSTORE / SUNIONSTORE / SDIFFSTORE destination key [key ...]: stores the result as a new
/// set (replacing the destination, whatever its type) and replies its size; an empty result
/// deletes the destination.
fn algebra_store(ctx: &mut Ctx<'_>, args: &Args, op: Op) -> CmdResult {
    let storage = ctx.storage();
    let db = ctx.db();
    let dst = &args[1][..];
    let _g = storage.lock(db, &args[1..]);
    let sources = write_sources(ctx, &args[2..])?;
    let members = compute(db, op, &sources)?;
    drop(sources);
    let mut batch = Batch::default();
    let event = if members.is_empty() {
        if ctx.lookup_write(dst)?.is_some() {
            batch.delete_meta(storage, db, dst);
        }
        "del"
    } else {
        let mut meta = Meta::collection(Kind::Set, storage.next_version()?, 0);
        meta.len = members.len() as u64;
        let coll = Coll::new(db, dst, &meta);
        for m in &members {
            batch.put_member(storage, Cf::Data, &coll, m, b"");
        }
        batch.put_meta(storage, db, dst, &meta);
        match op {
            Op::Inter => "sinterstore",
            Op::Union => "sunionstore",
            Op::Diff => "sdiffstore",
        }
    };
    if !batch.is_empty() {
        storage.commit(batch)?;
        let class = if event == "del" {
            Class::Generic
        } else {
            Class::Set
        };
        ctx.notify(class, event, dst);
    }
    ctx.out.int(members.len() as i64);
    Ok(())
}

fn sinter(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    algebra(ctx, args, Op::Inter)
}

fn sunion(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    algebra(ctx, args, Op::Union)
}

fn sdiff(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    algebra(ctx, args, Op::Diff)
}

fn sinterstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    algebra_store(ctx, args, Op::Inter)
}

fn sunionstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    algebra_store(ctx, args, Op::Union)
}

fn sdiffstore(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    algebra_store(ctx, args, Op::Diff)
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]: the size of the intersection, counting stops
/// at `limit` (0 = no limit).
fn sintercard(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let numkeys = kvik_resp::parse_i64(&args[1])
        .filter(|n| *n > 0)
        .ok_or(ERR_NUMKEYS)?;
    if numkeys > args.len() as i64 - 2 {
        return Err(ERR_NUMKEYS_ARGS);
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0u64;
    let mut i = end;
    while i < args.len() {
        if args[i].eq_ignore_ascii_case(b"LIMIT") && i + 1 < args.len() {
            limit = kvik_resp::parse_i64(&args[i + 1])
                .filter(|n| *n >= 0)
                .ok_or(ERR_LIMIT)? as u64;
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let sources = read_sources(ctx, &args[2..end])?;
    let (n, _) = intersect(ctx.db(), &sources, limit, false)?;
    drop(sources);
    ctx.out.int(n as i64);
    Ok(())
}
