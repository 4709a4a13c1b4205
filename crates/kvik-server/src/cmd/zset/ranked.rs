//! Counting a big sorted set's members through its rank index (`cache::rank`).
//!
//! ZRANK, ZREVRANK, ZCOUNT, ZRANGE by rank, score and lex ranges with far LIMIT offsets,
//! ZLEXCOUNT, ZREMRANGEBYRANK and ZRANDMEMBER (a random rank each pick, for sets too big for
//! a deck) of a set the hot cache holds as its meta (`cache-sets`) with
//! at least `zset-rank-index-min-len` members ask its rank index how many members lie in the
//! buckets before the place they want, and walk only inside that bucket, on the reader's
//! snapshot (lex queries only in a set whose members share one score, where score order is
//! member order). The snapshot was taken after the key's fill token, and an answer is kept
//! only if no write of the set began or ended since that token ([`Ranked::whole`]), so the
//! index and the snapshot describe the same set; otherwise the caller walks as before (a
//! writer holds the key's lock, so its token stands). The first query of a set that needs the
//! index builds it by one walk of the whole set (what one rank from the middle cost before);
//! writes keep it current.

use super::ZSet;
use crate::cache::rank::{Located, RankIndex};
use crate::cache::{Cache, FillToken};
use crate::cmd::ctx::CmdError;
use crate::storage::MemberCursor;

/// A sorted set's rank index as one reader may use it.
pub(crate) struct Ranked<'a> {
    cache: &'a Cache,
    gen: u64,
    token: FillToken,
}

/// Whether a cursor's walk reached its end or must give way to the plain walk.
pub(super) type Counted = Result<Option<u64>, CmdError>;

impl<'a> Ranked<'a> {
    /// The rank index of `set`, cached under generation `gen` (`token`: the key's fill token,
    /// taken before the set's snapshot), if one may serve it: `min_len` members or more (0:
    /// never). Nothing is built yet: the first lookup that needs the index builds it
    /// ([`Ranked::ready`]), so a query that can do without it costs nothing more.
    pub(super) fn open(
        cache: &'a Cache,
        gen: u64,
        token: FillToken,
        set: &ZSet<'_, '_>,
        min_len: u64,
    ) -> Option<Ranked<'a>> {
        (min_len != 0 && set.len >= min_len && !cache.ranks().refused(gen)).then_some(Ranked {
            cache,
            gen,
            token,
        })
    }

    /// Whether the index can answer for `set`: present and counting its members, or built
    /// now by walking it. `false` when the set is not to be indexed (a build outgrew the
    /// budget) or a write raced the build.
    fn ready(&self, set: &ZSet<'_, '_>) -> Result<bool, CmdError> {
        let ranks = self.cache.ranks();
        match ranks.with(self.gen, RankIndex::total) {
            Some(total) if total == set.len => return Ok(true),
            // The index disagrees with the set while no write raced this read: it lost count
            // (a bug, not a race). Dropped: the next query builds it again from the set.
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
        // A build that outgrows the budget stops there, and the set is not tried again (each
        // query would walk it twice).
        let budget = self.cache.rank_budget();
        let mut index = RankIndex::default();
        let mut c = set.index();
        c.first();
        while let Some((entry, _)) = c.entry() {
            index.push(entry);
            if index.bytes() > budget {
                ranks.refuse(self.gen);
                return Ok(false);
            }
            c.next();
        }
        c.status()?;
        let index = index.finish();
        Ok(index.total() == set.len && ranks.install(self.gen, index, budget, || self.whole()))
    }

    /// Whether no write of the set began or ended since the token: the counts taken from the
    /// index and the snapshot's walks agree.
    fn whole(&self) -> bool {
        self.cache.unchanged_since(&self.token)
    }

    /// Whether an answer counted through the index stands ([`Ranked::whole`]); counted if so.
    pub(super) fn stands(&self) -> bool {
        let whole = self.whole();
        if whole {
            self.cache.ranks().note_answer();
        }
        whole
    }

    /// The members between two counts of [`Ranked::count_before`] (a range's start and its
    /// end), if both were counted and the answer stands.
    pub(super) fn between(&self, start: Option<u64>, end: Option<u64>) -> Option<u64> {
        match (start, end) {
            (Some(a), Some(b)) if self.stands() => Some(b.saturating_sub(a)),
            _ => None,
        }
    }

    /// The members of `set` whose score-index entries sort before `bound` (`None`: all).
    pub(super) fn count_before(&self, set: &ZSet<'_, '_>, bound: Option<&[u8]>) -> Counted {
        let Some(bound) = bound else {
            return Ok(Some(set.len));
        };
        let Some((mut c, before)) = self.at_bucket(set, |index| index.locate(bound))? else {
            return Ok(None);
        };
        let mut n = 0u64;
        while let Some((entry, _)) = c.entry() {
            if entry >= bound {
                break;
            }
            n += 1;
            c.next();
        }
        c.status()?;
        Ok(Some(before + n))
    }

    /// A cursor of `set`'s score index at the entry of ascending rank `rank` (< the set's
    /// length), or `None` if the index is gone.
    pub(super) fn seek_rank<'v>(
        &self,
        set: &ZSet<'v, '_>,
        rank: u64,
    ) -> Result<Option<MemberCursor<'v>>, CmdError> {
        let Some((mut c, before)) = self.at_bucket(set, |index| index.locate_rank(rank))? else {
            return Ok(None);
        };
        for _ in before..rank {
            c.next();
        }
        c.status()?;
        Ok(Some(c))
    }

    /// A cursor of `set`'s score index at the fence of the bucket `locate` picks, and the
    /// entries before that bucket; `None` if there is no index to ask.
    fn at_bucket<'v>(
        &self,
        set: &ZSet<'v, '_>,
        locate: impl FnOnce(&RankIndex) -> Located<'_>,
    ) -> Result<Option<(MemberCursor<'v>, u64)>, CmdError> {
        if !self.ready(set)? {
            return Ok(None);
        }
        let Some((fence, before)) = self.cache.ranks().with(self.gen, |index| {
            let at = locate(index);
            (at.fence.to_vec(), at.before)
        }) else {
            return Ok(None);
        };
        let mut c = set.index();
        c.seek(&fence);
        Ok(Some((c, before)))
    }
}
