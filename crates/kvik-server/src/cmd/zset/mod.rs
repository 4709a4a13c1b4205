//! Sorted-set commands: Redis 7.0's `sorted_set` group.
//!
//! A sorted set is its meta record (kind `zset`, version, length) plus two entries per member
//! under the same collection prefix:
//!
//! ```text
//! data CF    member                      -> encode_score(score)   (8 bytes)
//! score CF   encode_score(score) member  -> ""                    (the score index)
//! ```
//!
//! The data CF answers "what is the score of m" with one point read and orders members by their
//! bytes (lexicographic ranges, SCAN, random picks). The score CF's byte order is score order, then
//! member bytes among equal scores: exactly the order of Redis's skiplist, so ZRANGE and friends
//! are one seek plus a walk. Scores are stored normalised (-0 as 0, which Redis also prints as 0).
//!
//! Costs: score and lex ranges are O(log N + M). There is no order-statistic tree on disk; a
//! rank is found by counting. For a set the hot cache holds (`cache-sets`) of
//! `zset-rank-index-min-len` members or more, ZRANK, ZREVRANK, ZCOUNT, ZRANGE by index,
//! ZREMRANGEBYRANK, far LIMIT offsets of score ranges, and ZLEXCOUNT and far lex offsets of a
//! set whose members share one score count through an in-memory rank index (`ranked`,
//! `cache::rank`): the members of the buckets before the place asked for, then a walk inside
//! one bucket of ~64, O(log N + 64 + M); ZRANDMEMBER of such a set too big for a deck draws
//! random ranks. Otherwise ranks are walked from the nearer end, O(min(rank, N - rank) + M),
//! ZCOUNT and ZLEXCOUNT walk their range and offsets are stepped over.
//!
//! Where they run: the reads that walk at most [`SMALL_SAMPLE`] members (a small set, a short
//! range from either end or after a seek, a count through the rank index) run on the I/O thread
//! (`rtc_nowait_read`); one that would walk further, build an index or split a bucket goes to
//! a worker when it finds out, before it replies ([`ZSet::may_step`], `Ranked::bucket`).
//!
//! Readers take no lock: [`ZSet`] is one snapshot, so the length and the members agree. Writers
//! hold the key's stripe lock and go through [`ZWriter`], which keeps the two entries of each
//! member in step, counts the length, and commits member changes and the meta record in one
//! batch (or deletes the key when it becomes empty, as Redis does). STORE commands and ZRANGESTORE
//! write a fresh collection version ([`store_result`]).
//!
//! Differences from Redis 7.0 (each a consequence of the disk layout, none in a reply shape):
//!
//! - Rank operations of a set without a rank index cost O(min(rank, N - rank)) instead of
//!   O(log N) (see above); with one, a walk of up to a bucket more than Redis's.
//! - Lexicographic ranges walk members in byte order; Redis walks its skiplist, which gives the
//!   same members only when they share one score (the only case Redis defines).
//! - A stored score is never -0 (Redis keeps -0 in big skiplist-encoded sets and prints "-0").
//! - ZSCAN of a set above 128 members walks member order with server-side cursors (an unknown
//!   cursor is "ERR invalid cursor"); ZRANDMEMBER of a count at least the size lists the whole
//!   set highest score first (Redis's order for small sets); a negative ZRANDMEMBER count whose
//!   reply would pass `proto-max-bulk-len` is refused with "ERR value is out of range".
//!
//! Modules: `range` parses score and lex intervals, `basic` holds the single-key commands
//! (ZADD ... ZREMRANGEBYLEX, ZSCAN), `pop` the popping and random commands (ZPOPMIN ... BZMPOP,
//! ZRANDMEMBER), `setops` ZUNION, ZINTER, ZDIFF, their STORE forms and ZINTERCARD; `geo` the geo
//! commands, which are sorted-set commands over geohash scores.

mod basic;
mod geo;
mod pop;
pub mod range;
mod setops;

use super::collection::{notify_write, Entry, HeldColl, SMALL_SAMPLE};
pub use geo::COMMANDS as GEO_COMMANDS;

use super::ctx::{Args, BigCollRead, CmdError, Ctx, MemberRead, Reply};
use super::ranked::{self, Counted, Ordered, Ranked};
use super::spec::{
    keys_after_count, numkeys_at_1, numkeys_at_2, Class, CommandSpec, Flags, KeySpec,
};
use crate::cache::Cache;
use crate::storage::encoding::{decode_score, encode_score, prefix_successor, Kind, Meta};
use crate::storage::pop_hints::End;
use crate::storage::{Batch, Cf, Coll, MemberCursor, Storage, View, Wait};
use kvik_resp::Proto;
use range::{LexBound, LexRange, ScoreRange};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

const READ: Flags = Flags::READONLY;
const READ_FAST: Flags = Flags::READONLY.union(Flags::FAST);
const WRITE: Flags = Flags::WRITE;
const WRITE_FAST: Flags = Flags::WRITE.union(Flags::FAST);
const WRITE_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const WRITE_OOM_FAST: Flags = WRITE_OOM.union(Flags::FAST);
const BLOCKING: Flags = Flags::WRITE.union(Flags::NOSCRIPT).union(Flags::BLOCKING);

const ACL_READ_FAST: &[&str] = &["read", "sortedset", "fast"];
const ACL_READ_SLOW: &[&str] = &["read", "sortedset", "slow"];
const ACL_WRITE_FAST: &[&str] = &["write", "sortedset", "fast"];
const ACL_WRITE_SLOW: &[&str] = &["write", "sortedset", "slow"];
const ACL_BLOCKING: &[&str] = &["write", "sortedset", "slow", "blocking"];
const ACL_BLOCKING_FAST: &[&str] = &["write", "sortedset", "fast", "blocking"];

/// ZUNIONSTORE / ZINTERSTORE / ZDIFFSTORE: the destination, then numkeys keys after index 2.
fn store_keys(args: &Args) -> Vec<usize> {
    let mut keys = vec![1];
    keys.extend(keys_after_count(args, 2));
    keys
}

const RANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted \
     set and M the number of elements returned. kvik: ranges by index walk the score index from \
     the nearer end, O(min(start, N-start)+M).";

/// Declares one sorted-set command (group "sorted_set").
const fn z(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    handler: super::spec::Handler,
    acl: &'static [&'static str],
) -> CommandSpec {
    super::spec::collection_command("sorted_set", name, arity, flags, keys, handler, acl)
}

pub static COMMANDS: &[CommandSpec] = &[
    z("zadd", -4, WRITE_OOM_FAST, KeySpec::ONE, basic::zadd, ACL_WRITE_FAST)
.rtc_write()
.event(Class::ZSet, "zadd")
.event(Class::ZSet, "zincr").doc(
        "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.",
        "1.2.0",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
    ),
    z("zincrby", 4, WRITE_OOM_FAST, KeySpec::ONE, basic::zincrby, ACL_WRITE_FAST)
.event(Class::ZSet, "zincr").doc(
        "Increments the score of a member in a sorted set.",
        "1.2.0",
        "O(log(N)) where N is the number of elements in the sorted set.",
    ),
    z("zrem", -3, WRITE_FAST, KeySpec::ONE, basic::zrem, ACL_WRITE_FAST)
.event(Class::ZSet, "zrem")
.event(Class::Generic, "del").doc(
        "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.",
        "1.2.0",
        "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
    ),
    z("zcard", 2, READ_FAST, KeySpec::ONE, |c, a| basic::zcard(c, a), ACL_READ_FAST)
    .rtc(|c, a| basic::zcard(c, a)).doc(
        "Returns the number of members in a sorted set.",
        "1.2.0",
        "O(1)",
    ),
    z("zcount", 4, READ_FAST, KeySpec::ONE, basic::zcount, ACL_READ_FAST)
    .rtc_nowait_read()
    .doc(
        "Returns the count of members in a sorted set that have scores within a range.",
        "2.0.0",
        "O(log(N)+M) with N being the number of elements in the sorted set. kvik counts the M members in the range.",
    ),
    z("zlexcount", 4, READ_FAST, KeySpec::ONE, basic::zlexcount, ACL_READ_FAST)
    .rtc_nowait_read()
    .doc(
        "Returns the number of members in a sorted set within a lexicographical range.",
        "2.8.9",
        "O(log(N)+M) with N being the number of elements in the sorted set. kvik counts the M members in the range.",
    ),
    z("zscore", 3, READ_FAST, KeySpec::ONE, |c, a| basic::zscore(c, a), ACL_READ_FAST)
    .rtc(|c, a| basic::zscore(c, a)).doc(
        "Returns the score of a member in a sorted set.",
        "1.2.0",
        "O(1)",
    ),
    z("zmscore", -3, READ_FAST, KeySpec::ONE, |c, a| basic::zmscore(c, a), ACL_READ_FAST)
    .rtc(|c, a| basic::zmscore(c, a)).doc(
        "Returns the score of one or more members in a sorted set.",
        "6.2.0",
        "O(N) where N is the number of members being requested.",
    ),
    z("zrank", 3, READ_FAST, KeySpec::ONE, basic::zrank, ACL_READ_FAST)
    .rtc_nowait_read()
    .doc(
        "Returns the index of a member in a sorted set ordered by ascending scores.",
        "2.0.0",
        "O(log(N)) in Redis; kvik counts through the set's rank index when it has one (a walk inside one bucket of ~64 members), else walks the score index from the nearer end: O(min(rank, N-rank)).",
    ),
    z("zrevrank", 3, READ_FAST, KeySpec::ONE, basic::zrevrank, ACL_READ_FAST)
    .rtc_nowait_read()
    .doc(
        "Returns the index of a member in a sorted set ordered by descending scores.",
        "2.0.0",
        "O(log(N)) in Redis; kvik counts through the set's rank index when it has one (a walk inside one bucket of ~64 members), else walks the score index from the nearer end: O(min(rank, N-rank)).",
    ),
    z("zrange", -4, READ, KeySpec::ONE, basic::zrange, ACL_READ_SLOW)
    .rtc_nowait_read()
    .doc(
        "Returns members in a sorted set within a range of indexes, scores or lexicographical order.",
        "1.2.0",
        RANGE_COMPLEXITY,
    ),
    z("zrangestore", -5, WRITE_OOM, KeySpec::TWO, basic::zrangestore, ACL_WRITE_SLOW)
.event(Class::ZSet, "zrangestore")
.event(Class::Generic, "del").doc(
        "Stores a range of members from sorted set in a key.",
        "6.2.0",
        RANGE_COMPLEXITY,
    ),
    z("zrangebyscore", -4, READ, KeySpec::ONE, basic::zrangebyscore, ACL_READ_SLOW)
    .rtc_nowait_read()
    .doc(
        "Returns members in a sorted set within a range of scores.",
        "1.0.5",
        RANGE_COMPLEXITY,
    ),
    z("zrevrangebyscore", -4, READ, KeySpec::ONE, basic::zrevrangebyscore, ACL_READ_SLOW)
    .rtc_nowait_read()
    .doc(
        "Returns members in a sorted set within a range of scores in reverse order.",
        "2.2.0",
        RANGE_COMPLEXITY,
    ),
    z("zrangebylex", -4, READ, KeySpec::ONE, basic::zrangebylex, ACL_READ_SLOW)
    .rtc_nowait_read()
    .doc(
        "Returns members in a sorted set within a lexicographical range.",
        "2.8.9",
        RANGE_COMPLEXITY,
    ),
    z("zrevrangebylex", -4, READ, KeySpec::ONE, basic::zrevrangebylex, ACL_READ_SLOW)
    .rtc_nowait_read()
    .doc(
        "Returns members in a sorted set within a lexicographical range in reverse order.",
        "2.8.9",
        RANGE_COMPLEXITY,
    ),
    z("zrevrange", -4, READ, KeySpec::ONE, basic::zrevrange, ACL_READ_SLOW)
    .rtc_nowait_read()
    .doc(
        "Returns members in a sorted set within a range of indexes in reverse order.",
        "1.2.0",
        RANGE_COMPLEXITY,
    ),
    z("zremrangebyrank", 4, WRITE, KeySpec::ONE, basic::zremrangebyrank, ACL_WRITE_SLOW)
.event(Class::ZSet, "zremrangebyrank")
.event(Class::Generic, "del").doc(
        "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.",
        "2.0.0",
        "O(min(start, N-start)+M) in kvik (the index walk), M the number of elements removed.",
    ),
    z("zremrangebyscore", 4, WRITE, KeySpec::ONE, basic::zremrangebyscore, ACL_WRITE_SLOW)
.event(Class::ZSet, "zremrangebyscore")
.event(Class::Generic, "del").doc(
        "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.",
        "1.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    ),
    z("zremrangebylex", 4, WRITE, KeySpec::ONE, basic::zremrangebylex, ACL_WRITE_SLOW)
.event(Class::ZSet, "zremrangebylex")
.event(Class::Generic, "del").doc(
        "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.",
        "2.8.9",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.",
    ),
    z("zscan", -3, READ, KeySpec::ONE, basic::zscan, ACL_READ_SLOW).doc(
        "Iterates over members and scores of a sorted set.",
        "2.8.0",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
    ),
    z("zpopmin", -2, WRITE_FAST, KeySpec::ONE, pop::zpopmin, ACL_WRITE_FAST)
.rtc_write()
.event(Class::ZSet, "zpopmin")
.event(Class::Generic, "del").doc(
        "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0",
        "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
    ),
    z("zpopmax", -2, WRITE_FAST, KeySpec::ONE, pop::zpopmax, ACL_WRITE_FAST)
.rtc_write()
.event(Class::ZSet, "zpopmax")
.event(Class::Generic, "del").doc(
        "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0",
        "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.",
    ),
    z("zmpop", -4, WRITE, KeySpec::NONE, pop::zmpop, ACL_WRITE_SLOW)
.event(Class::ZSet, "zpopmin")
.event(Class::ZSet, "zpopmax")
.event(Class::Generic, "del")
        .movable(numkeys_at_1)
        .doc(
            "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.",
            "7.0.0",
            "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
        ),
    z("bzpopmin", -3, BLOCKING.union(Flags::FAST), KeySpec::ALL_BUT_LAST, pop::bzpopmin, ACL_BLOCKING_FAST)
.event(Class::ZSet, "zpopmin")
.event(Class::Generic, "del")
        .doc(
            "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
            "5.0.0",
            "O(log(N)) with N being the number of elements in the sorted set.",
        ),
    z("bzpopmax", -3, BLOCKING.union(Flags::FAST), KeySpec::ALL_BUT_LAST, pop::bzpopmax, ACL_BLOCKING_FAST)
.event(Class::ZSet, "zpopmax")
.event(Class::Generic, "del")
        .doc(
            "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.",
            "5.0.0",
            "O(log(N)) with N being the number of elements in the sorted set.",
        ),
    z("bzmpop", -5, Flags::WRITE.union(Flags::BLOCKING), KeySpec::NONE, pop::bzmpop, ACL_BLOCKING)
        .event(Class::ZSet, "zpopmin")
        .event(Class::ZSet, "zpopmax")
        .event(Class::Generic, "del")
        .movable(numkeys_at_2)
        .doc(
            "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
            "7.0.0",
            "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.",
        ),
    z("zrandmember", -2, READ, KeySpec::ONE, pop::zrandmember, ACL_READ_SLOW)
.rtc_nowait_read()
.doc(
        "Returns one or more random members from a sorted set.",
        "6.2.0",
        "O(N) where N is the number of members returned; kvik walks the members up to the farthest one picked.",
    ),
    z("zunion", -3, READ, KeySpec::NONE, setops::zunion, ACL_READ_SLOW)
        .movable(numkeys_at_1)
        .doc(
            "Returns the union of multiple sorted sets.",
            "6.2.0",
            "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
        ),
    z("zinter", -3, READ, KeySpec::NONE, setops::zinter, ACL_READ_SLOW)
        .movable(numkeys_at_1)
        .doc(
            "Returns the intersect of multiple sorted sets.",
            "6.2.0",
            "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
        ),
    z("zdiff", -3, READ, KeySpec::NONE, setops::zdiff, ACL_READ_SLOW)
        .movable(numkeys_at_1)
        .doc(
            "Returns the difference between multiple sorted sets.",
            "6.2.0",
            "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
        ),
    z("zunionstore", -4, WRITE_OOM, KeySpec::ONE, setops::zunionstore, ACL_WRITE_SLOW)
.event(Class::ZSet, "zunionstore")
.event(Class::Generic, "del")
        .movable(store_keys)
        .doc(
            "Stores the union of multiple sorted sets in a key.",
            "2.0.0",
            "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.",
        ),
    z("zinterstore", -4, WRITE_OOM, KeySpec::ONE, setops::zinterstore, ACL_WRITE_SLOW)
.event(Class::ZSet, "zinterstore")
.event(Class::Generic, "del")
        .movable(store_keys)
        .doc(
            "Stores the intersect of multiple sorted sets in a key.",
            "2.0.0",
            "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.",
        ),
    z("zdiffstore", -4, WRITE_OOM, KeySpec::ONE, setops::zdiffstore, ACL_WRITE_SLOW)
.event(Class::ZSet, "zdiffstore")
.event(Class::Generic, "del")
        .movable(store_keys)
        .doc(
            "Stores the difference of multiple sorted sets in a key.",
            "6.2.0",
            "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.",
        ),
    z("zintercard", -3, READ, KeySpec::NONE, setops::zintercard, ACL_READ_SLOW)
        .movable(numkeys_at_1)
        .doc(
            "Returns the number of members of the intersect of multiple sorted sets.",
            "7.0.0",
            "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
        ),
];

// ---- Shared pieces -------------------------------------------------------------------------

/// A member and its score.
pub(crate) type Item = (Vec<u8>, f64);

/// Scores leave kvik normalised: -0 prints as 0, as Redis prints a stored -0.
fn norm(score: f64) -> f64 {
    if score == 0.0 {
        0.0
    } else {
        score
    }
}

/// Splits a score-index entry into its score and member.
fn split_index(entry: &[u8]) -> Option<(f64, &[u8])> {
    Some((decode_score(entry)?, entry.get(8..)?))
}

/// The score-index entry of `member` at `score`.
fn index_entry(score: f64, member: &[u8]) -> Vec<u8> {
    let mut e = Vec::with_capacity(8 + member.len());
    e.extend_from_slice(&encode_score(score));
    e.extend_from_slice(member);
    e
}

/// How a range walk reads one entry of the column family it walks: (member, score).
type Decode = for<'e> fn(&'e [u8], &'e [u8]) -> Option<(&'e [u8], f64)>;

/// An entry of the score index (score + member, no value).
fn index_item<'e>(entry: &'e [u8], _: &'e [u8]) -> Option<(&'e [u8], f64)> {
    split_index(entry).map(|(s, m)| (m, s))
}

/// An entry of the data CF (member, value = score).
fn data_item<'e>(member: &'e [u8], value: &'e [u8]) -> Option<(&'e [u8], f64)> {
    Some((member, decode_score(value).unwrap_or(0.0)))
}

/// The most entries a range walk after a seek to its start can step over: its offset and its
/// limit (no limit: unbounded).
fn walk_bound(offset: i64, limit: i64) -> u64 {
    if limit < 0 {
        u64::MAX
    } else {
        (offset as u64).saturating_add(limit as u64)
    }
}

/// The loop of every range walk: from `c`'s entry on (backwards when `rev`), `place` says of
/// each member whether it has reached the range's start and whether it is past its end; the
/// first `offset` members inside are skipped, then up to `limit` (negative: all) go to `f`.
/// Returns how many did.
fn walk_range(
    mut c: MemberCursor<'_>,
    decode: Decode,
    rev: bool,
    offset: i64,
    limit: i64,
    place: impl Fn(&[u8], f64) -> (bool, bool),
    mut f: impl FnMut(&[u8], f64),
) -> Result<u64, CmdError> {
    let (mut skip, mut taken) = (offset, 0u64);
    while let Some((k, v)) = c.entry() {
        let Some((m, s)) = decode(k, v) else { break };
        let (inside_start, past_end) = place(m, s);
        if past_end {
            break;
        }
        if inside_start {
            if skip > 0 {
                skip -= 1;
            } else {
                f(m, s);
                taken += 1;
                if limit > 0 && taken >= limit as u64 {
                    break;
                }
            }
        }
        if rev {
            c.prev();
        } else {
            c.next();
        }
    }
    c.status()?;
    Ok(taken)
}

/// Writes `items` as a sorted-set reply: member (and score) per item; WITHSCORES is a flat
/// array in RESP2 and an array of [member, score] pairs in RESP3.
fn reply_items(out: &mut Reply, items: &[Item], withscores: bool) {
    if !withscores {
        out.array(items.len());
        for (m, _) in items {
            out.bulk(m);
        }
    } else if out.proto == Proto::Resp3 {
        reply_pairs(out, items);
    } else {
        out.array(items.len() * 2);
        for (m, s) in items {
            out.bulk(m);
            out.double(*s);
        }
    }
}

/// `items` as an array of [member, score] pairs, in both protocols (ZMPOP, BZMPOP).
fn reply_pairs(out: &mut Reply, items: &[Item]) {
    out.array(items.len());
    for (m, s) in items {
        out.array(2);
        out.bulk(m);
        out.double(*s);
    }
}

/// Counts a keyspace hit or miss, for commands that look up several keys in one view.
/// Whether sorted sets' rank indexes keep their members' scores (`zset-rank-index-scores`).
fn scores_indexed(ctx: &Ctx<'_>) -> bool {
    ctx.server.config.zset_rank_index_scores.load(Relaxed)
}

fn count_lookup(ctx: &Ctx<'_>, found: bool) {
    use std::sync::atomic::Ordering;
    let stats = &ctx.server.stats;
    if found {
        stats.keyspace_hits.fetch_add(1, Ordering::Relaxed);
    } else {
        stats.keyspace_misses.fetch_add(1, Ordering::Relaxed);
    }
}

/// One sorted set as a reader sees it: a view (a snapshot, or the latest state for a writer
/// holding the lock), the collection and its length.
pub(crate) struct ZSet<'a, 'k> {
    pub view: View<'a>,
    pub coll: Coll<'k>,
    pub len: u64,
    /// Its rank index, for the queries that count members ([`ZSet::read_counted`]).
    ranked: Option<ranked::Ranked<'a>>,
    /// Its members in the hot cache, when it holds the set as its meta
    /// ([`ZSet::read_counted`]): a member's score found there spares a point read.
    held: Option<HeldMembers<'a>>,
    /// Read on an I/O thread: a query that would walk more than [`SMALL_SAMPLE`] members
    /// goes to a worker ([`ZSet::may_walk`]).
    no_wait: bool,
}

/// A big sorted set's members as the hot cache holds them (member -> encoded score), under
/// its cached meta's generation, for a reader that took the key's fill token first.
struct HeldMembers<'a> {
    big: BigCollRead<'a>,
    cache: &'a Cache,
    now_ms: u64,
}

/// A sorted set's rank index counts its score index.
impl<'a> Ordered<'a> for ZSet<'a, '_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn entries(&self) -> MemberCursor<'a> {
        self.index()
    }
}

impl<'a, 'k> ZSet<'a, 'k> {
    /// The sorted set `key` for a read command (keyspace hit or miss counted), or `None`.
    fn read(ctx: &Ctx<'a>, key: &'k [u8]) -> Result<Option<ZSet<'a, 'k>>, CmdError> {
        Ok(ctx
            .read_collection(key, Kind::ZSet)?
            .map(|(view, meta)| ZSet {
                view,
                coll: Coll::new(ctx.db(), key, &meta),
                len: meta.len,
                ranked: None,
                held: None,
                no_wait: ctx.mode.no_wait(),
            }))
    }

    /// [`ZSet::read`] for a query that may count members (ZRANK, ZREVRANK, ZCOUNT,
    /// ZLEXCOUNT, the range reads): a set the hot cache holds as its meta, of
    /// `zset-rank-index-min-len` members or more, counts them through its rank index (see
    /// `ranked`), built when a query first needs it.
    fn read_counted(ctx: &Ctx<'a>, key: &'k [u8]) -> Result<Option<ZSet<'a, 'k>>, CmdError> {
        if ctx.mode.no_wait() && !ctx.server.config.rtc_zset_reads.load(Relaxed) {
            return Err(CmdError::WOULD_BLOCK);
        }
        let min_len = ctx.server.config.zset_rank_index_min_len.load(Relaxed);
        if min_len == 0 {
            return Self::read(ctx, key);
        }
        let (big, meta, view) = match ctx.read_members(key, Kind::ZSet)? {
            MemberRead::Missing => return Ok(None),
            MemberRead::Stored(view, meta) => (None, meta, Some(view)),
            MemberRead::Big(mut big) => {
                let (meta, view) = (big.meta.clone(), big.take_view());
                (Some(big), meta, view)
            }
        };
        // A cached meta comes without a snapshot: one taken now, after the token.
        let mut set = ZSet {
            view: view.unwrap_or_else(|| ctx.view()),
            coll: Coll::new(ctx.db(), key, &meta),
            len: meta.len,
            ranked: None,
            held: None,
            no_wait: ctx.mode.no_wait(),
        };
        if let Some(big) = big {
            let cache = ctx.server.storage.cache();
            let id = (big.gen(), big.token());
            set.ranked = Ranked::open(ctx, cache, id, (set.len, min_len), scores_indexed(ctx));
            set.held = Some(HeldMembers {
                big,
                cache,
                now_ms: ctx.now_ms,
            });
        }
        Ok(Some(set))
    }

    /// The score of `member`: from the hot cache if it holds the member and no write of the
    /// set began or ended since the read's token (so it is the view's), else read from the
    /// view and cached unless a write came between.
    fn score(&self, member: &[u8]) -> Result<Option<f64>, CmdError> {
        if let Some(h) = &self.held {
            if let Some(mut hit) = h.big.cached(h.cache, &[member], h.now_ms) {
                return Ok(hit.pop().flatten().and_then(|v| decode_score(&v)));
            }
        }
        let value = self.view.get_member(&self.coll, member)?;
        if let Some(h) = &self.held {
            let (token, gen) = (h.big.token(), h.big.gen());
            h.cache.fill_field(token, gen, member, value.as_deref(), 0);
        }
        Ok(value.and_then(|v| decode_score(&v)))
    }

    /// A cursor over the score index.
    fn index(&self) -> MemberCursor<'a> {
        self.view.members(Cf::Score, &self.coll)
    }

    /// The 0-based rank of `member` (at `score`) in ascending order: counted through the rank
    /// index if the set has one, else walking the score index from both ends at once, so the
    /// cost is the distance to the nearer end.
    fn rank(&self, member: &[u8], score: f64) -> Result<Option<u64>, CmdError> {
        let target = index_entry(score, member);
        if let Some(r) = &self.ranked {
            if let Some(n) = r.rank_of(self, &target)? {
                if r.stands() {
                    return Ok(Some(n));
                }
            }
        }
        self.may_walk()?;
        let mut fwd = self.index();
        let mut back = self.index();
        fwd.first();
        back.last();
        let mut i = 0u64;
        while i <= self.len / 2 {
            match fwd.entry() {
                Some((e, _)) if e == target.as_slice() => return Ok(Some(i)),
                Some(_) => fwd.next(),
                None => break,
            }
            match back.entry() {
                Some((e, _)) if e == target.as_slice() => {
                    return Ok(Some(self.len.saturating_sub(1 + i)))
                }
                Some(_) => back.prev(),
                None => break,
            }
            i += 1;
        }
        fwd.status()?;
        back.status()?;
        Ok(None)
    }

    /// Members at ascending ranks `start..=end` (already clamped), in descending order when
    /// `rev` (then the ranks count from the highest score). Walks from the nearer end.
    fn by_rank(&self, start: u64, end: u64, rev: bool) -> Result<Vec<Item>, CmdError> {
        let last = self.len.saturating_sub(1);
        let (lo, hi) = if rev {
            (last - end, last - start)
        } else {
            (start, end)
        };
        let n = (hi - lo + 1) as usize;
        let from_front = lo <= last - hi;
        let skip = if from_front { lo } else { last - hi };
        self.may_step(n as u64)?;
        if let Some(r) = &self.ranked {
            // Near either end (a top ten): from the entries the index holds there.
            if let Some(entries) = r.at_ends(self.len, lo, hi) {
                let mut out: Vec<Item> = entries
                    .iter()
                    .filter_map(|e| split_index(e).map(|(s, m)| (m.to_vec(), s)))
                    .collect();
                if rev {
                    out.reverse();
                }
                return Ok(out);
            }
            if r.worth_a_seek(skip) {
                if let Some(mut c) = r.seek_rank(self, lo)? {
                    let mut out = Vec::with_capacity(n.min(1 << 16));
                    while out.len() < n {
                        let Some((s, m)) = c.entry().and_then(|(e, _)| split_index(e)) else {
                            break;
                        };
                        out.push((m.to_vec(), s));
                        c.next();
                    }
                    c.status()?;
                    if r.stands() {
                        if rev {
                            out.reverse();
                        }
                        return Ok(out);
                    }
                }
            }
        }
        self.may_step(skip + n as u64)?;
        let mut out = Vec::with_capacity(n.min(1 << 16));
        let mut c = self.index();
        if from_front {
            c.first();
            for _ in 0..lo {
                c.next();
            }
        } else {
            c.last();
            for _ in 0..(last - hi) {
                c.prev();
            }
        }
        while out.len() < n {
            let Some((e, _)) = c.entry() else { break };
            let Some((s, m)) = split_index(e) else { break };
            out.push((m.to_vec(), s));
            if from_front {
                c.next();
            } else {
                c.prev();
            }
        }
        c.status()?;
        if from_front == rev {
            out.reverse();
        }
        Ok(out)
    }

    /// Members whose score is in `r`, ascending (descending when `rev`), after skipping
    /// `offset` of them, at most `limit` (negative: no limit). A negative offset selects
    /// nothing, as in Redis.
    fn by_score(
        &self,
        r: &ScoreRange,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Item>, CmdError> {
        let mut out = Vec::new();
        self.walk_score(r, rev, offset, limit, |m, s| out.push((m.to_vec(), s)))?;
        Ok(out)
    }

    /// How many members have a score in `r` (ZCOUNT): through the rank index, the members
    /// before the range's end less those before its start; else by walking the range.
    fn count_score(&self, r: &ScoreRange) -> Result<u64, CmdError> {
        if r.is_empty() {
            return Ok(0);
        }
        if r.open_below() && r.open_above() {
            return Ok(self.len);
        }
        if let Some(ranked) = &self.ranked {
            let start = self.before_score(ranked, r, false)?;
            let end = self.before_score(ranked, r, true)?;
            if let Some(n) = ranked.between(start, end) {
                return Ok(n);
            }
        }
        self.walk_score(r, false, 0, -1, |_, _| {})
    }

    /// Whether this read may walk the set: on an I/O thread only a small one
    /// ([`SMALL_SAMPLE`] members, as `collection::walks_on_a_worker` rules), a bigger one on a
    /// worker. The queries that count through the rank index walk at most a bucket and so run
    /// on the I/O thread too.
    fn may_walk(&self) -> Result<(), CmdError> {
        self.may_step(self.len)
    }

    /// [`ZSet::may_walk`] for a walk of at most `steps` entries.
    fn may_step(&self, steps: u64) -> Result<(), CmdError> {
        if self.no_wait && steps.min(self.len) > SMALL_SAMPLE {
            return Err(CmdError::WOULD_BLOCK);
        }
        Ok(())
    }

    /// The members below score range `r`'s start, or with `upper` those up to its end,
    /// counted through the rank index; an open end (`-inf`, `+inf`) is counted without it.
    fn before_score(&self, ranked: &Ranked<'_>, r: &ScoreRange, upper: bool) -> Counted {
        match upper {
            false if r.open_below() => return Ok(Some(0)),
            true if r.open_above() => return Ok(Some(self.len)),
            _ => {}
        }
        let edge = match (upper, if upper { r.maxex } else { r.minex }) {
            (false, false) => Some(encode_score(r.min).to_vec()),
            (false, true) => prefix_successor(&encode_score(r.min)),
            (true, false) => prefix_successor(&encode_score(r.max)),
            (true, true) => Some(encode_score(r.max).to_vec()),
        };
        ranked.count_before(self, edge.as_deref())
    }

    /// The members below lexicographic bound `bound` (a range's start), or with `upper` those
    /// up to it (a range's end), counted through the rank index of a set whose members all
    /// have the score `score` (encoded), so that score order is member order.
    fn before_lex(
        &self,
        ranked: &Ranked<'_>,
        score: [u8; 8],
        bound: &LexBound,
        upper: bool,
    ) -> Counted {
        let (member, past) = match (bound, upper) {
            (LexBound::Min, _) => return Ok(Some(0)),
            (LexBound::Max, _) => return Ok(Some(self.len)),
            (LexBound::Incl(v), false) | (LexBound::Excl(v), true) => (v, false),
            (LexBound::Incl(v), true) | (LexBound::Excl(v), false) => (v, true),
        };
        let mut edge = Vec::with_capacity(9 + member.len());
        edge.extend_from_slice(&score);
        edge.extend_from_slice(member);
        if past {
            edge.push(0); // the first entry after `member`'s own
        }
        ranked.count_before(self, Some(&edge))
    }

    /// The one score every member has (encoded), if they all have one: lexicographic ranges
    /// are defined for such sets, and only there does the rank index's order serve them.
    fn one_score(&self) -> Result<Option<[u8; 8]>, CmdError> {
        let mut c = self.index();
        c.first();
        let low = c.entry().and_then(|(e, _)| e.get(..8)).map(<[u8]>::to_vec);
        c.last();
        let high = c.entry().and_then(|(e, _)| e.get(..8)).map(<[u8]>::to_vec);
        c.status()?;
        Ok(match (low, high) {
            (Some(l), Some(h)) if l == h => l.try_into().ok(),
            _ => None,
        })
    }

    /// A range walk that skips `offset` members, started through the rank index at the member
    /// it must reach: `edge` counts the members before the range's start (ascending) or up to
    /// its end (`rev`). `None` when the index cannot serve it (none, an offset not worth it,
    /// a write raced the read): the caller walks. The walk's picks reach `f` only once the
    /// answer stands.
    fn walk_indexed(
        &self,
        rev: bool,
        offset: i64,
        limit: i64,
        edge: impl FnOnce(&Ranked<'_>) -> Counted,
        place: impl Fn(&[u8], f64) -> (bool, bool),
        f: &mut impl FnMut(&[u8], f64),
    ) -> Result<Option<u64>, CmdError> {
        let Some(ranked) = &self.ranked else {
            return Ok(None);
        };
        if !ranked.worth_a_seek(offset.max(0) as u64) {
            return Ok(None);
        }
        let Some(edge) = edge(ranked)? else {
            return Ok(None);
        };
        let target = if rev {
            edge.checked_sub(1 + offset as u64)
        } else {
            Some(edge + offset as u64).filter(|&t| t < self.len)
        };
        let mut picked = Vec::new();
        if let Some(target) = target {
            let Some(c) = ranked.seek_rank(self, target)? else {
                return Ok(None);
            };
            walk_range(c, index_item, rev, 0, limit, place, |m, s| {
                picked.push((m.to_vec(), s))
            })?;
        }
        if !ranked.stands() {
            return Ok(None);
        }
        for (m, s) in &picked {
            f(m, *s);
        }
        Ok(Some(picked.len() as u64))
    }

    /// [`ZSet::walk_score`] of a range that starts at an end of the order (`+inf` walking
    /// down, `-inf` up: every member has reached its start), from the entries the rank index
    /// keeps at that end, if they cover `offset + limit` (a leaderboard's top ten by score).
    fn walk_ends(
        &self,
        rev: bool,
        offset: i64,
        limit: i64,
        place: &impl Fn(&[u8], f64) -> (bool, bool),
        f: &mut impl FnMut(&[u8], f64),
    ) -> Option<u64> {
        let ranked = self.ranked.as_ref()?;
        let (offset, limit) = (u64::try_from(offset).ok()?, u64::try_from(limit).ok()?);
        let n = offset.checked_add(limit)?.min(self.len);
        if n == 0 {
            return None;
        }
        let (lo, hi) = if rev {
            (self.len - n, self.len - 1)
        } else {
            (0, n - 1)
        };
        let entries = ranked.at_ends(self.len, lo, hi)?;
        let mut items = entries
            .iter()
            .map(|e| split_index(e))
            .collect::<Option<Vec<_>>>()?;
        if rev {
            items.reverse();
        }
        let mut picked = 0;
        for (i, (s, m)) in items.into_iter().enumerate() {
            if place(m, s).1 {
                break;
            }
            if i as u64 >= offset {
                f(m, s);
                picked += 1;
            }
        }
        Some(picked)
    }

    /// Calls `f(member, score)` for each member [`ZSet::by_score`] selects; returns how many.
    /// A far offset is skipped through the rank index when the set has one.
    fn walk_score(
        &self,
        r: &ScoreRange,
        rev: bool,
        offset: i64,
        limit: i64,
        mut f: impl FnMut(&[u8], f64),
    ) -> Result<u64, CmdError> {
        if r.is_empty() || offset < 0 || limit == 0 {
            return Ok(0);
        }
        self.may_step(walk_bound(offset, limit))?;
        // (reached the range's start, passed its end), in the walk's direction.
        let place = |_: &[u8], s: f64| {
            if rev {
                (r.lte_max(s), !r.gte_min(s))
            } else {
                (r.gte_min(s), !r.lte_max(s))
            }
        };
        let from_an_end = if rev { r.open_above() } else { r.open_below() };
        if from_an_end {
            if let Some(n) = self.walk_ends(rev, offset, limit, &place, &mut f) {
                return Ok(n);
            }
        }
        let edge = |ranked: &Ranked<'_>| self.before_score(ranked, r, rev);
        if let Some(n) = self.walk_indexed(rev, offset, limit, edge, place, &mut f)? {
            return Ok(n);
        }
        // Seeks past an excluded bound's own score, so members tied at it are not stepped
        // over one by one (and [`walk_bound`] bounds the walk).
        let mut c = self.index();
        match (rev, if rev { r.maxex } else { r.minex }) {
            (true, true) => c.seek_back(&encode_score(r.max)),
            (true, false) => match prefix_successor(&encode_score(r.max)) {
                Some(after) => c.seek_back(&after),
                None => c.last(),
            },
            (false, true) => match prefix_successor(&encode_score(r.min)) {
                Some(after) => c.seek(&after),
                None => return Ok(0),
            },
            (false, false) => c.seek(&encode_score(r.min)),
        }
        walk_range(c, index_item, rev, offset, limit, place, f)
    }

    /// Members in the lexicographic range `r`, like [`ZSet::by_score`].
    fn by_lex(
        &self,
        r: &LexRange,
        rev: bool,
        offset: i64,
        limit: i64,
    ) -> Result<Vec<Item>, CmdError> {
        let mut out = Vec::new();
        self.walk_lex(r, rev, offset, limit, |m, s| out.push((m.to_vec(), s)))?;
        Ok(out)
    }

    /// Calls `f(member, score)` for each member [`ZSet::by_lex`] selects; returns how many.
    /// Walks the data CF, whose order is member order: Redis's order whenever the members share
    /// one score (the case lex ranges are defined for); in such a set a far offset is skipped
    /// through the rank index, whose order is then the same.
    fn walk_lex(
        &self,
        r: &LexRange,
        rev: bool,
        offset: i64,
        limit: i64,
        mut f: impl FnMut(&[u8], f64),
    ) -> Result<u64, CmdError> {
        if r.is_empty() || offset < 0 || limit == 0 {
            return Ok(0);
        }
        self.may_step(walk_bound(offset, limit))?;
        let place = |m: &[u8], _: f64| {
            if rev {
                (r.lte_max(m), !r.gte_min(m))
            } else {
                (r.gte_min(m), !r.lte_max(m))
            }
        };
        let start = if rev { &r.max } else { &r.min };
        let indexed = self.ranked.is_some() && offset > 2 * i64::from(crate::cache::rank::BUCKET);
        if let Some(score) = if indexed { self.one_score()? } else { None } {
            let edge = |ranked: &Ranked<'_>| self.before_lex(ranked, score, start, rev);
            if let Some(n) = self.walk_indexed(rev, offset, limit, edge, place, &mut f)? {
                return Ok(n);
            }
        }
        let mut c = self.view.members(Cf::Data, &self.coll);
        match (start, rev) {
            (LexBound::Min, false) => c.first(),
            (LexBound::Max, true) => c.last(),
            (LexBound::Max, false) | (LexBound::Min, true) => return Ok(0),
            (b, false) => c.seek(b.value().unwrap_or_default()),
            (b, true) => c.seek_back(b.value().unwrap_or_default()),
        }
        walk_range(c, data_item, rev, offset, limit, place, f)
    }

    /// How many members are in lexicographic range `r` (ZLEXCOUNT): in a set whose members
    /// share one score, counted through the rank index as ZCOUNT is; else by walking.
    fn count_lex(&self, r: &LexRange) -> Result<u64, CmdError> {
        if r.is_empty() {
            return Ok(0);
        }
        if let Some(ranked) = &self.ranked {
            if let Some(score) = self.one_score()? {
                let start = self.before_lex(ranked, score, &r.min, false)?;
                let end = self.before_lex(ranked, score, &r.max, true)?;
                if let Some(n) = ranked.between(start, end) {
                    return Ok(n);
                }
            }
        }
        self.walk_lex(r, false, 0, -1, |_, _| {})
    }

    /// `n` uniform random members (distinct, in random order, or with repeats) as
    /// (member, encoded score), each found by a random rank through the rank index: a seek and
    /// at most a bucket of steps, where a walk down a big set's member bytes costs dozens of
    /// seeks per pick. `None` without an index, for counts [`ranked::random_ranks`] leaves to
    /// the walks, or when a write raced the read. On a worker only (a first query builds the
    /// index by walking the set).
    fn ranked_picks(&self, n: u64, distinct: bool) -> Result<Option<Vec<Entry>>, CmdError> {
        let Some(ranked) = &self.ranked else {
            return Ok(None);
        };
        let Some(ranks) = ranked::random_ranks(self.len, n, distinct) else {
            return Ok(None);
        };
        let Some(entries) = ranked.entries_at(self, &ranks)? else {
            return Ok(None);
        };
        Ok(entries
            .iter()
            .map(|(e, _)| split_index(e).map(|(s, m)| (m.to_vec(), encode_score(s).to_vec())))
            .collect())
    }

    /// Every member in ascending score order.
    fn all(&self) -> Result<Vec<Item>, CmdError> {
        let mut out = Vec::with_capacity(self.len.min(1 << 16) as usize);
        self.view.for_each_member(Cf::Score, &self.coll, |e, _| {
            if let Some((s, m)) = split_index(e) {
                out.push((m.to_vec(), s));
            }
            true
        })?;
        Ok(out)
    }
}

/// One sorted set being changed by a writer that holds its lock: tracks the pending scores (a
/// command may name one member twice), the length, and the batch. With `cache-sets`, the hot
/// cache holds the set's meta and the scores of the members written (see [`HeldColl`]): the
/// writer reads them from there, and its commit updates them.
pub(crate) struct ZWriter<'a, 'k> {
    storage: &'a Storage,
    db: u16,
    key: &'k [u8],
    meta: Meta,
    existed: bool,
    batch: Batch,
    dirty: bool,
    pending: HashMap<Vec<u8>, Option<f64>>,
    held: Option<HeldColl>,
    /// Whether reads and the commit may wait (not on an I/O thread; see `Mode::NoWait`).
    wait: Wait,
    /// The end a pop took from and the last index entry it removed: noted at the commit, so
    /// the set's next pop from that end seeks from there (`storage::pop_hints`).
    popped_to: Option<(End, Vec<u8>)>,
}

impl<'a, 'k> ZWriter<'a, 'k> {
    /// The sorted set `key` (WRONGTYPE for another kind); if it does not exist, a new empty one
    /// when `create`, else `None`. The caller holds the key's lock.
    fn open(ctx: &Ctx<'a>, key: &'k [u8], create: bool) -> Result<Option<Self>, CmdError> {
        let storage = ctx.storage();
        let (held, meta) = HeldColl::open(ctx, key, Kind::ZSet)?;
        let (meta, existed) = match meta {
            Some(meta) => (meta, true),
            None if create => (Meta::collection(Kind::ZSet, ctx.next_version()?, 0), false),
            None => return Ok(None),
        };
        Ok(Some(ZWriter {
            storage,
            db: ctx.db(),
            key,
            meta,
            existed,
            batch: Batch::default(),
            dirty: false,
            pending: HashMap::new(),
            held,
            wait: ctx.wait(),
            popped_to: None,
        }))
    }

    fn coll(&self) -> Coll<'k> {
        Coll::new(self.db, self.key, &self.meta)
    }

    /// The set as committed so far (this writer's pending changes are not visible).
    fn current(&self) -> ZSet<'a, 'k> {
        ZSet {
            view: self.storage.latest_with(self.wait),
            coll: self.coll(),
            len: self.meta.len,
            ranked: None,
            held: None,
            no_wait: false,
        }
    }

    /// [`ZWriter::current`] with the set's rank index, for a write that selects members by
    /// rank (ZREMRANGEBYRANK). The writer holds the key's lock, so no other write can change
    /// the set under the token taken now.
    fn current_counted(&self, ctx: &Ctx<'a>) -> ZSet<'a, 'k> {
        let mut set = self.current();
        let min_len = ctx.server.config.zset_rank_index_min_len.load(Relaxed);
        if let Some(gen) = self.held.as_ref().and_then(HeldColl::big_gen) {
            let cache = self.storage.cache();
            let token = cache.fill_token(self.db, self.key);
            set.ranked = Ranked::open(
                ctx,
                cache,
                (gen, token),
                (set.len, min_len),
                scores_indexed(ctx),
            );
        }
        set
    }

    /// The score of `member`, pending changes included.
    fn score(&self, member: &[u8]) -> Result<Option<f64>, CmdError> {
        if let Some(s) = self.pending.get(member) {
            return Ok(*s);
        }
        match &self.held {
            _ if !self.existed => Ok(None),
            Some(held) => Ok(held
                .values(self.storage, self.wait, &self.coll(), &[member])?
                .pop()
                .flatten()
                .and_then(|v| decode_score(&v))),
            None => self.current().score(member),
        }
    }

    /// Sets `member`'s score to `new` (its current score is `old`).
    fn put(&mut self, member: &[u8], old: Option<f64>, new: f64) {
        let coll = self.coll();
        let st = self.storage;
        let removed = old.map(|o| index_entry(o, member));
        match &removed {
            Some(entry) => self.batch.delete_member(st, Cf::Score, &coll, entry),
            None => self.meta.len += 1,
        }
        let value = encode_score(new);
        let added = index_entry(new, member);
        self.batch.put_member(st, Cf::Data, &coll, member, &value);
        self.batch.put_member(st, Cf::Score, &coll, &added, b"");
        if let Some(held) = &mut self.held {
            held.note(member, Some(&value));
            held.note_index(removed, Some(added));
        }
        self.pending.insert(member.to_vec(), Some(new));
        self.dirty = true;
    }

    /// Removes `member`, whose score is `old`.
    fn remove(&mut self, member: &[u8], old: f64) {
        let coll = self.coll();
        let st = self.storage;
        let removed = index_entry(old, member);
        self.batch.delete_member(st, Cf::Data, &coll, member);
        self.batch.delete_member(st, Cf::Score, &coll, &removed);
        self.meta.len = self.meta.len.saturating_sub(1);
        if let Some(held) = &mut self.held {
            held.note(member, None);
            held.note_index(Some(removed), None);
        }
        self.pending.insert(member.to_vec(), None);
        self.dirty = true;
    }

    /// Removes the first `count` members from the low (or, with `max`, the high) end and
    /// returns them in pop order.
    fn pop(&mut self, count: u64, max: bool) -> Result<Vec<Item>, CmdError> {
        let n = count.min(self.meta.len);
        let end = if max { End::High } else { End::Low };
        let items = if n == 0 {
            Vec::new()
        } else {
            self.pop_from(end, n)?
        };
        for (m, s) in &items {
            self.remove(m, *s);
        }
        Ok(items)
    }

    /// The `n` members nearest `end`, nearest first, read from where this set's last pop from
    /// that end left it, if that is noted (`storage::pop_hints`): past the tombstones of the
    /// members popped before.
    fn pop_from(&mut self, end: End, n: u64) -> Result<Vec<Item>, CmdError> {
        let set = self.current();
        let mut c = set.index();
        let note = self
            .storage
            .pop_hints()
            .get(&self.coll().raw().prefix(), end);
        match (end, note) {
            (End::Low, Some(from)) => c.seek(&from),
            (End::Low, None) => c.first(),
            (End::High, Some(from)) => c.seek_back(&from),
            (End::High, None) => c.last(),
        }
        let mut out = Vec::with_capacity((n as usize).min(1 << 16));
        let mut last = None;
        while (out.len() as u64) < n {
            let Some((e, _)) = c.entry() else { break };
            let Some((s, m)) = split_index(e) else { break };
            out.push((m.to_vec(), s));
            last = Some(e.to_vec());
            match end {
                End::Low => c.next(),
                End::High => c.prev(),
            }
        }
        c.status()?;
        self.popped_to = last.map(|e| (end, e));
        Ok(out)
    }

    /// Commits the changes: the members and the meta record with the new length, or the key's
    /// deletion if the set became empty. Nothing is written if nothing changed.
    fn commit(self) -> Result<(), CmdError> {
        if !self.dirty {
            return Ok(());
        }
        let mut batch = self.batch;
        if self.meta.len == 0 {
            if !self.existed {
                return Ok(());
            }
            batch.delete_meta(self.storage, self.db, self.key);
        } else {
            let update = self.held.and_then(|h| h.update(false));
            batch.put_meta_with_update(self.storage, self.db, self.key, &self.meta, update);
        }
        let storage = self.storage;
        storage.commit_with(batch, self.wait)?;
        // Noted in a transaction too (an I/O thread's turn): one rolled back forgets the
        // notes (`Storage::forget_pop_notes`).
        if let Some((end, to)) = self.popped_to.filter(|_| self.meta.len > 0) {
            let prefix = Coll::new(self.db, self.key, &self.meta).raw().prefix();
            storage.pop_hints().set(prefix, end, to);
        }
        Ok(())
    }

    /// [`commit`](ZWriter::commit), then, if anything changed, keyspace event `event` (sorted
    /// set class) and `del` if the set became empty.
    fn commit_notify(self, ctx: &Ctx<'_>, event: &'static str) -> Result<(), CmdError> {
        let (changed, key) = (self.dirty, self.key);
        let emptied = self.existed && self.meta.len == 0;
        self.commit()?;
        if changed {
            notify_write(ctx, Class::ZSet, event, key, emptied);
        }
        Ok(())
    }
}

/// Replaces `dst` (any type) with a new sorted set of `items` (distinct members), or deletes
/// it when `items` is empty. The caller holds `dst`'s lock.
/// Emits `event` for `dst` (or `del` when an empty result deleted it).
fn store_result(
    ctx: &Ctx<'_>,
    dst: &[u8],
    items: &[Item],
    event: &'static str,
) -> Result<(), CmdError> {
    let storage = ctx.storage();
    let db = ctx.db();
    let mut batch = Batch::default();
    if items.is_empty() {
        if ctx.lookup_write(dst)?.is_none() {
            return Ok(());
        }
        batch.delete_meta(storage, db, dst);
    } else {
        let mut meta = Meta::collection(Kind::ZSet, storage.next_version()?, 0);
        meta.len = items.len() as u64;
        let coll = Coll::new(db, dst, &meta);
        for (m, s) in items {
            batch.put_member(storage, Cf::Data, &coll, m, &encode_score(*s));
            batch.put_member(storage, Cf::Score, &coll, &index_entry(*s, m), b"");
        }
        batch.put_meta(storage, db, dst, &meta);
    }
    storage.commit(batch)?;
    if items.is_empty() {
        ctx.notify(Class::Generic, "del", dst);
    } else {
        ctx.notify(Class::ZSet, event, dst);
    }
    Ok(())
}
