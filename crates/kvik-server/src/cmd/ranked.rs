//! Counting a big collection's members through its rank index (`cache::rank`).
//!
//! A sorted set's rank index counts its score order: ZRANK, ZREVRANK, ZCOUNT, ZRANGE by rank,
//! score and lex ranges with far LIMIT offsets, ZLEXCOUNT, ZREMRANGEBYRANK and ZRANDMEMBER (a
//! random rank each pick, for sets too big for a deck) of a set of at least
//! `zset-rank-index-min-len` members. A set's or a hash's counts its member order, for random
//! picks only (SRANDMEMBER, HRANDFIELD, SPOP of one too big for a deck, `set-rank-index`),
//! where a walk down the member bytes costs dozens of seeks per pick. Either way the
//! collection is one the hot cache holds as its meta (`cache-sets`, `cache-big-hashes`), and a
//! query asks the index how many entries lie in the buckets before the place it wants and
//! walks only inside that bucket, on the reader's snapshot (with a sorted set's scores in the
//! index, only among the entries of the place's score, or not at all: [`Within`]). The
//! snapshot was taken after the key's fill token, and an answer is kept only if no write of
//! the collection began or ended since that token ([`Ranked::whole`]), so the index and the
//! snapshot describe the same members; otherwise the caller walks as before (a writer holds
//! the key's lock, so its token stands). The first query that needs the index builds it by
//! one walk of the whole collection (what one rank from the middle cost before); writes keep
//! it current, and a query that would walk more than `rank-index-split-len` entries of a
//! bucket inserts have grown splits it first.

use crate::cache::rank::{shared_start, Located, RankIndex, Within, BUCKET, MIN_SPLIT_LEN};
use crate::cache::{Cache, CachedValue, CollValue, FillToken, Hit, Known};
use crate::cmd::collection::{CollWrite, Entry};
use crate::cmd::ctx::{CmdError, Ctx};
use crate::storage::encoding::{Kind, Meta};
use crate::storage::{Cf, Coll, MemberCursor, View};
use rand::Rng;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// A collection in the order its rank index counts.
pub(crate) trait Ordered<'v> {
    /// Its entries, as counted.
    fn len(&self) -> u64;
    /// A cursor over its entries in that order (unpositioned).
    fn entries(&self) -> MemberCursor<'v>;
}

/// A set's or hash's members in member order, as a snapshot holds them.
pub(crate) struct Members<'v, 'k> {
    pub view: View<'v>,
    pub coll: Coll<'k>,
    pub len: u64,
}

impl<'v> Ordered<'v> for Members<'v, '_> {
    fn len(&self) -> u64 {
        self.len
    }

    fn entries(&self) -> MemberCursor<'v> {
        self.view.members(Cf::Data, &self.coll)
    }
}

/// Random picks a rank index draws in one query however small the collection (see
/// [`random_ranks`]).
pub(crate) const PICKS_MAX: u64 = 1024;

/// A collection's rank index as one reader may use it.
pub(crate) struct Ranked<'a> {
    cache: &'a Cache,
    gen: u64,
    token: FillToken,
    /// A bucket holding more entries than this is split by the query that lands in it (0:
    /// never; `rank-index-split-len`).
    split_len: u32,
    /// Read on an I/O thread: a query that would build the index or split a bucket (a long
    /// walk) goes to a worker instead.
    no_wait: bool,
    /// A build keeps its entries' prefixes (a sorted set's scores, `zset-rank-index-scores`).
    prefixed: bool,
}

/// How long a query waits for another's build of the index it needs, and how many times it
/// looks for the index (each wait one look): a walk of the whole collection, the other way
/// to answer, takes about as long as the build.
const BUILD_WAIT: Duration = Duration::from_secs(10);
const BUILD_TRIES: usize = 3;

/// Entries drawn through an index, as (entry, value); `None`: the index could not answer.
pub(crate) type Picks = Result<Option<Vec<Entry>>, CmdError>;

/// Whether a cursor's walk reached its end or must give way to the plain walk.
pub(crate) type Counted = Result<Option<u64>, CmdError>;

/// Where a query's place in a collection is, as its index tells: `before` entries sort
/// before the place, or before `seek` if given, a key to walk the rest from.
struct Place {
    before: u64,
    seek: Option<Vec<u8>>,
}

impl<'a> Ranked<'a> {
    /// The rank index of a collection of `len` entries cached under generation `gen` (`token`:
    /// the key's fill token, taken before the snapshot it is read from), if one may serve it:
    /// `min_len` entries or more (0: never). Nothing is built yet: the first lookup that needs
    /// the index builds it ([`Ranked::ready`]), so a query that can do without it costs
    /// nothing more. A build keeps the entries' prefixes if `prefixed`.
    pub(crate) fn open(
        ctx: &Ctx<'_>,
        cache: &'a Cache,
        (gen, token): (u64, FillToken),
        (len, min_len): (u64, u64),
        prefixed: bool,
    ) -> Option<Ranked<'a>> {
        let split_len = ctx.server.config.rank_index_split_len.load(Relaxed) as u32;
        (min_len != 0 && len >= min_len && !cache.ranks().refused(gen)).then_some(Ranked {
            cache,
            gen,
            token,
            split_len: if split_len == 0 {
                0
            } else {
                split_len.max(MIN_SPLIT_LEN)
            },
            no_wait: ctx.mode.no_wait(),
            prefixed,
        })
    }

    /// Whether reaching a place `steps` entries past where a plain walk starts is cheaper
    /// through the index (a seek, then the steps inside a bucket) than by the walk: past two
    /// buckets, or with the scores kept (a seek lands at the place's own score) past half a
    /// bucket.
    pub(crate) fn worth_a_seek(&self, steps: u64) -> bool {
        let past = if self.prefixed {
            BUCKET / 2
        } else {
            2 * BUCKET
        };
        steps > u64::from(past)
    }

    /// Whether the index can answer for `set`: present and counting its entries, or built
    /// now by walking it. `false` when it is not to be indexed (a build outgrew the budget)
    /// or a write raced the build.
    fn ready<'v>(&self, set: &impl Ordered<'v>) -> Result<bool, CmdError> {
        let ranks = self.cache.ranks();
        // One reader builds a missing index; the others that need it meanwhile wait for that
        // build and look again (a few times, in case it lost a race with a write).
        for _ in 0..BUILD_TRIES {
            match ranks.with(self.gen, RankIndex::total) {
                Some(total) if total == set.len() => return Ok(true),
                // The index disagrees with the set while no write raced this read: it lost
                // count (a bug, not a race). Dropped: the next query builds it again.
                Some(_) if self.whole() => {
                    ranks.drop_index(self.gen);
                    return Ok(false);
                }
                Some(_) => return Ok(false),
                None => {}
            }
            if ranks.refused(self.gen) {
                return Ok(false);
            }
            if self.no_wait {
                return Err(CmdError::WOULD_BLOCK);
            }
            if let Some(_claim) = ranks.claim_build(self.gen, BUILD_WAIT) {
                return self.build(set);
            }
        }
        Ok(false)
    }

    /// Builds the index by one walk of `set` and installs it unless a write raced the walk.
    fn build<'v>(&self, set: &impl Ordered<'v>) -> Result<bool, CmdError> {
        let ranks = self.cache.ranks();
        // A build that outgrows the budget stops there, and the set is not tried again (each
        // query would walk it twice).
        let budget = self.cache.rank_budget();
        let mut index = RankIndex::building(set.len(), self.prefixed);
        let mut c = set.entries();
        c.first();
        if self.prefixed {
            // The prefixes are taken after the bytes the first and last entries share (and so
            // every entry between them).
            let mut last = set.entries();
            last.last();
            if let (Some((a, _)), Some((b, _))) = (c.entry(), last.entry()) {
                index = index.sharing(&a[..shared_start(a, b)]);
            }
            last.status()?;
        }
        while let Some((entry, _)) = c.entry() {
            index.push(entry);
            if index.bytes() > budget {
                // Without the prefixes if it fits so (8 bytes an entry, most of an index).
                if index.prefixed() {
                    index.drop_prefixes();
                }
                if index.bytes() > budget {
                    ranks.refuse(self.gen);
                    return Ok(false);
                }
            }
            c.next();
        }
        c.status()?;
        let index = index.finish();
        Ok(index.total() == set.len() && ranks.install(self.gen, index, budget, || self.whole()))
    }

    /// Whether no write of the set began or ended since the token: the counts taken from the
    /// index and the snapshot's walks agree.
    fn whole(&self) -> bool {
        self.cache.unchanged_since(&self.token)
    }

    /// Whether an answer counted through the index stands ([`Ranked::whole`]); counted if so.
    pub(crate) fn stands(&self) -> bool {
        let whole = self.whole();
        if whole {
            self.cache.ranks().note_answer();
        }
        whole
    }

    /// The members between two counts of [`Ranked::count_before`] (a range's start and its
    /// end), if both were counted and the answer stands.
    pub(crate) fn between(&self, start: Option<u64>, end: Option<u64>) -> Option<u64> {
        match (start, end) {
            (Some(a), Some(b)) if self.stands() => Some(b.saturating_sub(a)),
            _ => None,
        }
    }

    /// The entries of `set` that sort before `bound` (`None`: all): from the index alone if
    /// its prefixes place `bound`, else by a walk from where they leave off.
    pub(crate) fn count_before<'v>(&self, set: &impl Ordered<'v>, bound: Option<&[u8]>) -> Counted {
        match bound {
            Some(bound) => self.count_to(set, bound, |index| index.locate(bound)),
            None => Ok(Some(set.len())),
        }
    }

    /// The rank of `entry`, one of `set`'s (a member's own score-index entry): as
    /// [`Ranked::count_before`], placed without a walk when no other entry of its bucket
    /// shares its prefix (its score).
    pub(crate) fn rank_of<'v>(&self, set: &impl Ordered<'v>, entry: &[u8]) -> Counted {
        self.count_to(set, entry, |index| index.locate_entry(entry))
    }

    /// The entries of `set` before `bound`, placed by `locate`.
    fn count_to<'v>(
        &self,
        set: &impl Ordered<'v>,
        bound: &[u8],
        locate: impl Fn(&RankIndex) -> Located<'_>,
    ) -> Counted {
        let Some(place) = self.bucket(set, locate)? else {
            return Ok(None);
        };
        let Some(from) = place.seek else {
            self.cache.ranks().note_placed();
            return Ok(Some(place.before));
        };
        let mut c = set.entries();
        c.seek(&from);
        let mut n = 0u64;
        while let Some((entry, _)) = c.entry() {
            if entry >= bound {
                break;
            }
            n += 1;
            c.next();
        }
        c.status()?;
        Ok(Some(place.before + n))
    }

    /// The entries of ascending ranks `lo..=hi` (`lo <= hi < len`) of a set of `len`
    /// entries, from the ends of its index, if they hold them and the answer stands
    /// ([`Ranked::stands`]): no seek, nothing built.
    pub(crate) fn at_ends(&self, len: u64, lo: u64, hi: u64) -> Option<Vec<Vec<u8>>> {
        let entries = self.cache.ranks().with(self.gen, |index| {
            if index.total() != len {
                return None;
            }
            let held = index.at_ends(lo, hi)?;
            Some(held.iter().map(|e| e.to_vec()).collect::<Vec<_>>())
        })??;
        self.stands().then_some(entries)
    }

    /// A cursor of `set`'s entries at the one of ascending rank `rank` (< its length), or
    /// `None` if the index is gone.
    pub(crate) fn seek_rank<'v>(
        &self,
        set: &impl Ordered<'v>,
        rank: u64,
    ) -> Result<Option<MemberCursor<'v>>, CmdError> {
        let mut c = set.entries();
        Ok(self.move_to_rank(set, &mut c, rank)?.then_some(c))
    }

    /// Moves `c`, a cursor of `set`'s entries, to the one of ascending rank `rank` (< its
    /// length): a seek to its bucket's fence and the steps inside the bucket. False if the
    /// index is gone.
    fn move_to_rank<'v>(
        &self,
        set: &impl Ordered<'v>,
        c: &mut MemberCursor<'v>,
        rank: u64,
    ) -> Result<bool, CmdError> {
        let Some(Place {
            before,
            seek: Some(from),
        }) = self.bucket(set, |index| index.locate_rank(rank))?
        else {
            return Ok(false);
        };
        c.seek(&from);
        for _ in before..rank {
            c.next();
        }
        c.status()?;
        Ok(true)
    }

    /// The entries of `set` at `ranks` (each < its length), as (entry, value) in the order
    /// asked. Visited in ascending rank on one cursor: one less than a bucket ahead of the
    /// last is stepped to, a farther one sought (its bucket's fence, then the steps inside the
    /// bucket), so picks that fall close together share a walk. `None` if the index is gone or
    /// the answer does not stand ([`Ranked::stands`]).
    pub(crate) fn entries_at<'v>(&self, set: &impl Ordered<'v>, ranks: &[u64]) -> Picks {
        let mut order: Vec<usize> = (0..ranks.len()).collect();
        order.sort_unstable_by_key(|&i| ranks[i]);
        let mut out: Vec<Option<Entry>> = vec![None; ranks.len()];
        let mut c = set.entries();
        let mut last: Option<u64> = None;
        for i in order {
            let rank = ranks[i];
            match last {
                Some(r) if rank - r < u64::from(BUCKET) => {
                    for _ in r..rank {
                        c.next();
                    }
                }
                _ => {
                    if !self.move_to_rank(set, &mut c, rank)? {
                        return Ok(None);
                    }
                }
            }
            let Some((e, v)) = c.entry() else {
                c.status()?;
                return Ok(None);
            };
            out[i] = Some((e.to_vec(), v.to_vec()));
            last = Some(rank);
        }
        Ok(self.stands().then(|| out.into_iter().flatten().collect()))
    }

    /// Where the place `locate` finds in `set`'s index is (the index built first if need
    /// be); `None` if there is no index to ask. A query whose walk inside its bucket could
    /// take more than [`Ranked::split_len`] entries splits the bucket first (one walk of it,
    /// which the next queries there are spared) and asks `locate` again.
    fn bucket<'v>(
        &self,
        set: &impl Ordered<'v>,
        locate: impl Fn(&RankIndex) -> Located<'_>,
    ) -> Result<Option<Place>, CmdError> {
        if !self.ready(set)? {
            return Ok(None);
        }
        let ranks = self.cache.ranks();
        let found = |index: &RankIndex| {
            let at = locate(index);
            let (place, walk) = match at.within {
                Within::Exact(k) => {
                    let before = at.before + u64::from(k);
                    (Place { before, seek: None }, 0)
                }
                Within::From { skip, seek, walk } => {
                    let before = at.before + u64::from(skip);
                    let seek = Some(seek.unwrap_or_else(|| at.fence.to_vec()));
                    (Place { before, seek }, walk)
                }
            };
            let big = (self.split_len != 0 && walk > self.split_len)
                .then(|| (at.fence.to_vec(), at.len, at.end.map(<[u8]>::to_vec)));
            (place, big)
        };
        let Some((place, big)) = ranks.with(self.gen, found) else {
            return Ok(None);
        };
        if let Some((fence, len, end)) = big {
            if self.no_wait {
                return Err(CmdError::WOULD_BLOCK);
            }
            if self.split(set, &fence, len, end.as_deref())? {
                return Ok(ranks.with(self.gen, found).map(|(place, _)| place));
            }
        }
        Ok(Some(place))
    }

    /// Splits the bucket fenced at `fence` (up to `end`, the next fence), which the index
    /// says holds `len` entries, by walking it on the snapshot: true if the split was
    /// installed, false if the walk disagreed with the index or a write raced it.
    fn split<'v>(
        &self,
        set: &impl Ordered<'v>,
        fence: &[u8],
        len: u32,
        end: Option<&[u8]>,
    ) -> Result<bool, CmdError> {
        let mut c = set.entries();
        c.seek(fence);
        let mut fences = Vec::with_capacity((len / BUCKET) as usize);
        let mut n = 0u32;
        while let Some((entry, _)) = c.entry() {
            if end.is_some_and(|end| entry >= end) {
                break;
            }
            if n == len {
                return Ok(false); // more than the index counts: a write raced this read
            }
            if n > 0 && n.is_multiple_of(BUCKET) {
                fences.push(entry.into());
            }
            n += 1;
            c.next();
        }
        c.status()?;
        let budget = self.cache.rank_budget();
        Ok(n == len
            && self
                .cache
                .ranks()
                .split(self.gen, fence, len, fences, budget, || self.whole()))
    }
}

/// `n` uniform random ranks below `len`: distinct and in random order, or with repeats.
/// `None` for what the index should not draw: no picks, or more than [`PICKS_MAX`] and a
/// 64th of the collection (picks that close together walk most of it: `Sampler`'s one pass
/// costs the same), or distinct picks of more than a quarter of it.
pub(crate) fn random_ranks(len: u64, n: u64, distinct: bool) -> Option<Vec<u64>> {
    if n == 0 || n > PICKS_MAX.max(len / 64) || (distinct && n > len / 4) {
        return None;
    }
    let mut rng = rand::thread_rng();
    Some(if distinct {
        let mut r: Vec<u64> = rand::seq::index::sample(&mut rng, len as usize, n as usize)
            .into_iter()
            .map(|i| i as u64)
            .collect();
        rand::seq::SliceRandom::shuffle(&mut r[..], &mut rng);
        r
    } else {
        (0..n).map(|_| rng.gen_range(0..len)).collect()
    })
}

/// Whether sets and hashes draw random members through rank indexes (`set-rank-index`).
fn sets_indexed(ctx: &Ctx<'_>) -> bool {
    ctx.server.config.set_rank_index.load(Relaxed)
}

/// Whether their indexes keep their members' prefixes (`set-rank-index-prefixes`).
fn members_prefixed(ctx: &Ctx<'_>) -> bool {
    ctx.server.config.set_rank_index_prefixes.load(Relaxed)
}

/// `n` random members of set or hash `key` of `kind`, with their values, drawn by random ranks
/// through the rank index of its member order (`set-rank-index`): distinct and in random
/// order, or with repeats. For a collection no deck holds, on a worker (the first pick of a
/// collection builds its index by one walk). The collection is read again here, its fill token
/// first, then its meta from the hot cache (filled if the cache does not hold it), then a
/// snapshot, so index and snapshot can be checked to agree. `None` when the index cannot
/// answer (switched off, not cached, a hash with field TTLs, the counts above
/// [`random_ranks`]'s, or a write raced the read): the caller samples by walks.
pub(crate) fn member_picks(ctx: &Ctx<'_>, key: &[u8], kind: Kind, n: u64, distinct: bool) -> Picks {
    if !sets_indexed(ctx) {
        return Ok(None);
    }
    let cache = ctx.storage().cache();
    let db = ctx.db();
    let token = cache.fill_token(db, key);
    let cached = cache.get_with(db, key, ctx.now_ms, |known| match known {
        Known::Present(Hit {
            value: CachedValue::Coll(CollValue::Big(big)),
            expire_at_ms,
            ..
        }) if big.kind == kind && !big.field_ttls => Some((big.gen, big.meta(*expire_at_ms))),
        _ => None,
    });
    let view = ctx.view();
    let (gen, meta): (Option<u64>, Meta) = match cached.flatten() {
        Some((gen, meta)) => (Some(gen), meta),
        None => {
            let Some(meta) = view
                .get_meta(db, key)?
                .filter(|m| m.kind == kind && !m.is_expired(ctx.now_ms))
            else {
                return Ok(None);
            };
            // A hash small enough to cache whole stays cached that way.
            let big =
                !meta.field_ttls && (kind != Kind::Hash || meta.len as usize > cache.max_fields());
            (
                big.then(|| cache.fill_big(token, db, key, &meta)).flatten(),
                meta,
            )
        }
    };
    let (Some(gen), Some(ranks)) = (gen, random_ranks(meta.len, n, distinct)) else {
        return Ok(None);
    };
    let Some(ranked) = Ranked::open(
        ctx,
        cache,
        (gen, token),
        (meta.len, 1),
        members_prefixed(ctx),
    ) else {
        return Ok(None);
    };
    let members = Members {
        view,
        coll: Coll::new(db, key, &meta),
        len: meta.len,
    };
    ranked.entries_at(&members, &ranks)
}

/// `n` distinct random members of the set or hash `w` writes (SPOP), with their values,
/// through the rank index of the generation the cache held it under when `w` opened it, read
/// at the latest state: the writer holds the key's lock, so the token taken now stands unless
/// a write of another key sharing its slot intervenes. Before any change is staged; `None` as
/// for [`member_picks`].
pub(crate) fn held_picks(ctx: &Ctx<'_>, w: &CollWrite<'_, '_>, n: u64) -> Picks {
    if !sets_indexed(ctx) {
        return Ok(None);
    }
    let (Some(gen), Some(coll)) = (w.big_gen(), w.coll()) else {
        return Ok(None);
    };
    let Some(ranks) = random_ranks(w.len(), n, true) else {
        return Ok(None);
    };
    let cache = w.storage.cache();
    let token = cache.fill_token(w.db, w.key);
    let Some(ranked) = Ranked::open(
        ctx,
        cache,
        (gen, token),
        (w.len(), 1),
        members_prefixed(ctx),
    ) else {
        return Ok(None);
    };
    let members = Members {
        view: w.view(),
        coll,
        len: w.len(),
    };
    ranked.entries_at(&members, &ranks)
}
