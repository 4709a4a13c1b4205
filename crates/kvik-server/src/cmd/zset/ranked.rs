//! Counting a big sorted set's members through its rank index (`cache::rank`).
//!
//! ZRANK, ZREVRANK, ZCOUNT and ZRANGE by rank of a set the hot cache holds as its meta
//! (`cache-sets`) with at least `zset-rank-index-min-len` members ask its rank index how many
//! members lie in the buckets before the place they want, and walk only inside that bucket,
//! on the reader's snapshot. The snapshot was taken after the key's fill token, and an answer
//! is kept only if no write of the set began or ended since that token ([`Ranked::whole`]),
//! so the index and the snapshot describe the same set; otherwise the caller walks as before.
//! The first such query of a set builds its index by one walk of the whole set (what one rank
//! from the middle cost before); writes keep it current.

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
type Counted = Result<Option<u64>, CmdError>;

impl<'a> Ranked<'a> {
    /// The rank index of `set`, cached under generation `gen` (`token`: the key's fill token,
    /// taken before the set's snapshot), if one may serve it: `min_len` members or more (0:
    /// never); built by walking `set` when missing.
    pub(super) fn open(
        cache: &'a Cache,
        gen: u64,
        token: FillToken,
        set: &ZSet<'_, '_>,
        min_len: u64,
    ) -> Result<Option<Ranked<'a>>, CmdError> {
        if min_len == 0 || set.len < min_len {
            return Ok(None);
        }
        let r = Ranked { cache, gen, token };
        match cache.ranks().with(r.gen, RankIndex::total) {
            Some(total) if total == set.len => return Ok(Some(r)),
            // The index disagrees with the set while no write raced this read: it lost count
            // (a bug, not a race). Dropped: the next query builds it again from the set.
            Some(_) if r.whole() => {
                cache.ranks().drop_index(r.gen);
                return Ok(None);
            }
            Some(_) => return Ok(None),
            None => {}
        }
        if cache.ranks().refused(r.gen) {
            return Ok(None);
        }
        // A build that outgrows the budget stops there, and the set is not tried again (each
        // query would walk it twice).
        let budget = cache.rank_budget();
        let mut index = RankIndex::default();
        let mut c = set.index();
        c.first();
        while let Some((entry, _)) = c.entry() {
            index.push(entry);
            if index.bytes() > budget {
                cache.ranks().refuse(r.gen);
                return Ok(None);
            }
            c.next();
        }
        c.status()?;
        let index = index.finish();
        let built =
            index.total() == set.len && cache.ranks().install(r.gen, index, budget, || r.whole());
        Ok(built.then_some(r))
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

    /// The members of `set` whose score-index entries sort before `bound` (`None`: all).
    pub(super) fn count_before(&self, set: &ZSet<'_, '_>, bound: Option<&[u8]>) -> Counted {
        let Some(bound) = bound else {
            return Ok(Some(set.len));
        };
        let Some((mut c, before)) = self.at_bucket(set, |index| index.locate(bound)) else {
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
        let Some((mut c, before)) = self.at_bucket(set, |index| index.locate_rank(rank)) else {
            return Ok(None);
        };
        for _ in before..rank {
            c.next();
        }
        c.status()?;
        Ok(Some(c))
    }

    /// A cursor of `set`'s score index at the fence of the bucket `locate` picks, and the
    /// entries before that bucket; `None` if the index is gone.
    fn at_bucket<'v>(
        &self,
        set: &ZSet<'v, '_>,
        locate: impl FnOnce(&RankIndex) -> Located<'_>,
    ) -> Option<(MemberCursor<'v>, u64)> {
        let (fence, before) = self.cache.ranks().with(self.gen, |index| {
            let at = locate(index);
            (at.fence.to_vec(), at.before)
        })?;
        let mut c = set.index();
        c.seek(&fence);
        Some((c, before))
    }
}
