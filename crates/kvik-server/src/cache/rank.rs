//! Rank indexes of big collections: ZRANK, ZREVRANK and ZCOUNT in a short walk, and random
//! members of big sets and hashes drawn by rank.
//!
//! A sorted set's members are stored in score order (`storage`'s score index), so a member's
//! rank is the number of entries before it, and RocksDB can only count them by stepping over
//! each: at a million members a rank from the middle took ~0.3 s, where Redis's skiplist
//! answers in microseconds. A rank index divides an order of a collection's entries into
//! buckets at sampled entries (fences, one per [`BUCKET`] entries when built) and keeps each
//! bucket's count, so a rank is the counts of the buckets before the entry's plus a walk
//! inside its bucket. A sorted set's index counts its score index; a set's or hash's counts
//! its member order, so that a uniform random rank finds a uniform random member
//! (`cmd::ranked`).
//!
//! It lives beside a collection's cached meta ([`super::BigColl`]) and is keyed by that entry's
//! generation, so it follows the same rules as the members cached under it: built by a reader
//! from a walk during which no write of the collection began or ended (the key's fill token,
//! checked under this table's lock so no write's edits can fall between the check and the
//! install), changed by each committed write's index edits (`storage`'s commit, before the
//! entry is served again), and dead with its entry (a write without index edits drops the
//! entry; a new entry has a new generation). A reader uses it only if no write of the
//! collection began or ended between its lookup and the end of its walk.
//!
//! Fences never move, but an entry added past every other while the last bucket is full
//! opens a bucket of its own, and a bucket that empties closes (unless it is the last), so a
//! set that grows at its end and shrinks at its front (a sliding window of timestamps, ids
//! that only grow) keeps its index and about one fence per [`BUCKET`] entries. A bucket that
//! inserts at one place grow past `rank-index-split-len` entries (new members of a leaderboard
//! all at score 0) is split into buckets of [`BUCKET`] by the next query that must walk it: it
//! walks the bucket once, on its snapshot, and the split is installed on the same terms as a
//! build ([`RankIndexes::split`]). A bucket that grows past [`MAX_BUCKET`] entries before any
//! query splits it drops the index, and the next rank query builds it again.
//!
//! An index also holds the entries at both ends of its order ([`ENDS`] each when built, kept
//! exact by the same edits), so a sorted set's top ten is read without a seek.
//!
//! An index may also keep, per bucket, 8 bytes of each entry it holds, after the bytes all
//! its entries share (a sorted set's member's score, `zset-rank-index-scores`; a set's or
//! hash's member, `set-rank-index-prefixes`), sorted: a bound that shares its prefix with
//! no entry of its bucket (a score no member has, or a member whose score is its own in that
//! bucket) is placed without any walk, and one that does is walked from the first entry of
//! that prefix rather than from the fence ([`Within`]). ZCOUNT then reads nothing from
//! RocksDB, a ZRANK at most the ties of the member's score, and a rank from the middle seeks
//! its entry's score.
//!
//! Memory: the fences' bytes, the ends' entries and the prefixes (8 bytes an entry), bounded
//! in all by [`RankIndexes::new`]'s budget; the least recently used index is dropped first,
//! and a build that outgrows the budget with prefixes goes on without them.

use crate::fast_hash::FastHash;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Entries per bucket when an index is built: a rank walks at most about this many. 64
/// rather than 128 halves a ZRANK's walk (its steps were 29% of its CPU) for twice the
/// fences (~0.77 MB per million members instead of ~0.38; docs/benchmarks.md section 60).
pub const BUCKET: u32 = 64;
/// A bucket this full drops its index (a long run of inserts at one place).
pub const MAX_BUCKET: u32 = 8192;
/// The smallest bucket `rank-index-split-len` lets grow before a query splits it.
pub const MIN_SPLIT_LEN: u32 = 256;
/// One edit of the order a collection's rank index counts (a sorted set's score index, a
/// set's or hash's members) by a committed write: the entry removed, the entry added.
pub type IndexEdit = (Option<Vec<u8>>, Option<Vec<u8>>);

/// Bytes counted per fence beside its entry's bytes.
const FENCE_OVERHEAD: usize =
    std::mem::size_of::<Box<[u8]>>() + std::mem::size_of::<u32>() + std::mem::size_of::<u64>();

/// Bytes counted per bucket's list of prefixes, and per prefix.
const PREFIXES_OVERHEAD: usize = std::mem::size_of::<Vec<u64>>();
const PREFIX_BYTES: usize = std::mem::size_of::<u64>();

/// An entry's first 8 bytes, zero-padded, as a number: `prefix(a) < prefix(b)` implies
/// `a < b`, so sorted entries have sorted prefixes, and only entries of one prefix (ties)
/// need their bytes to be told apart.
fn prefix(entry: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = entry.len().min(8);
    b[..n].copy_from_slice(&entry[..n]);
    u64::from_be_bytes(b)
}

/// The bytes `a` and `b` start with alike.
pub fn shared_start(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// One collection's buckets: `fences[i]` is the smallest index entry bucket `i` may hold
/// (`fences[0]`, empty when built, is at most every entry: an entry added below it lowers
/// it), `counts[i]` the entries it holds now, and `sums` the same counts as a Fenwick tree,
/// so the entries before a bucket are summed in O(log buckets) (a million members make
/// ~8,000 buckets).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RankIndex {
    fences: Vec<Box<[u8]>>,
    counts: Vec<u32>,
    sums: Vec<u64>,
    total: u64,
    bytes: usize,
    /// No entry counted sorts after it (the greatest ever added; removals leave it): an entry
    /// added past it while the last bucket is full opens a bucket of its own.
    ceiling: Box<[u8]>,
    /// The entries at both ends of the order ([`Ends`]).
    ends: Ends,
    /// The entries a build expects (its collection's length), so that it keeps the last
    /// [`ENDS`] it is given; 0: unknown, no tail kept.
    expect: u64,
    /// Per bucket, the [`prefix`] of each entry it holds after `common`, sorted
    /// (`prefixes[i].len() == counts[i]`); empty if the index keeps none.
    prefixes: Vec<Vec<u64>>,
    prefixed: bool,
    /// Bytes every entry counted starts with (those its first and last entries shared when
    /// built: members named `element:0000...`): the prefixes are taken after them, where
    /// entries differ. An entry added without them drops the prefixes.
    common: Box<[u8]>,
    /// An entry of fewer than `common` and 8 bytes was counted: it shares its prefix with
    /// longer entries that sort after it, so a bound no longer than a prefix no longer places
    /// a prefix's ties.
    short: bool,
}

/// What a bucket's prefixes tell of a place in it ([`Located::within`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Within {
    /// Exactly this many of the bucket's entries sort before the place: no walk needed.
    Exact(u32),
    /// `skip` of the bucket's entries sort before `seek` (a key at or before the place;
    /// `None`: the bucket's fence), and a walk from there of at most `walk` entries finds the
    /// place.
    From {
        skip: u32,
        seek: Option<Vec<u8>>,
        walk: u32,
    },
}

/// Entries kept in memory at each end of the order: [`ENDS`] of each when built, then kept
/// by the edits, up to twice that. `head` is exactly the first `head.len()` entries and
/// `tail` the last `tail.len()`, in order, so ranks near either end (a leaderboard's top ten)
/// are read without a seek. Removals can empty an end; it stays empty until the next build.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Ends {
    head: Vec<Box<[u8]>>,
    tail: Vec<Box<[u8]>>,
    bytes: usize,
}

/// Entries each end holds when built ([`Ends`]).
pub const ENDS: usize = 64;

/// Bytes counted per entry an end holds beside its bytes.
const END_OVERHEAD: usize = std::mem::size_of::<Box<[u8]>>();

impl Ends {
    /// `e` left the order: out of the end that holds it (an end that should and does not
    /// is no longer known, and emptied).
    fn remove(&mut self, e: &[u8]) {
        if self.head.last().is_some_and(|l| *e <= **l) {
            Self::take(&mut self.head, &mut self.bytes, e);
        }
        if self.tail.first().is_some_and(|f| *e >= **f) {
            Self::take(&mut self.tail, &mut self.bytes, e);
        }
    }

    fn take(end: &mut Vec<Box<[u8]>>, bytes: &mut usize, e: &[u8]) {
        match end.binary_search_by(|x| (**x).cmp(e)) {
            Ok(i) => *bytes -= end.remove(i).len() + END_OVERHEAD,
            Err(_) => {
                *bytes -= end.iter().map(|x| x.len() + END_OVERHEAD).sum::<usize>();
                end.clear();
            }
        }
    }

    /// `e` joined an order of `total` entries: into each end it falls inside (or that held
    /// every entry), the farthest entry dropped past twice [`ENDS`].
    fn add(&mut self, e: &[u8], total: u64) {
        if self.head.len() as u64 == total || self.head.last().is_some_and(|l| *e < **l) {
            let i = self.head.partition_point(|x| **x < *e);
            self.head.insert(i, e.into());
            self.bytes += e.len() + END_OVERHEAD;
            if self.head.len() > 2 * ENDS {
                let last = self.head.pop().expect("over twice ENDS");
                self.bytes -= last.len() + END_OVERHEAD;
            }
        }
        if self.tail.len() as u64 == total || self.tail.first().is_some_and(|f| *e > **f) {
            let i = self.tail.partition_point(|x| **x < *e);
            self.tail.insert(i, e.into());
            self.bytes += e.len() + END_OVERHEAD;
            if self.tail.len() > 2 * ENDS {
                let first = self.tail.remove(0);
                self.bytes -= first.len() + END_OVERHEAD;
            }
        }
    }
}

/// Where a bound falls: its bucket's fence, the entries of all buckets before it, the
/// entries the bucket holds, the next bucket's fence (`None`: it is the last), and where in
/// the bucket the place is, as far as its prefixes tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located<'a> {
    pub fence: &'a [u8],
    pub before: u64,
    pub len: u32,
    pub end: Option<&'a [u8]>,
    pub within: Within,
}

impl RankIndex {
    /// An index to build from a walk of `len` entries ([`RankIndex::push`] each), keeping
    /// their prefixes if `prefixed`.
    pub fn building(len: u64, prefixed: bool) -> RankIndex {
        RankIndex {
            expect: len,
            prefixed,
            ..RankIndex::default()
        }
    }

    /// Whether the index keeps its entries' prefixes.
    pub fn prefixed(&self) -> bool {
        self.prefixed
    }

    /// Takes the prefixes after `common`, bytes every entry to come starts with (called
    /// before the first [`RankIndex::push`]).
    pub fn sharing(mut self, common: &[u8]) -> RankIndex {
        if self.prefixed {
            self.common = common.into();
            self.bytes += common.len();
        }
        self
    }

    /// Drops the prefixes (a build that outgrew its budget with them, an entry added that
    /// does not start with `common`).
    pub fn drop_prefixes(&mut self) {
        if self.prefixed {
            self.bytes -= self.prefix_bytes();
            self.prefixes = Vec::new();
            self.common = Box::default();
            self.prefixed = false;
        }
    }

    fn prefix_bytes(&self) -> usize {
        self.prefixes.len() * PREFIXES_OVERHEAD
            + self.total as usize * PREFIX_BYTES
            + self.common.len()
    }

    /// The prefix of `entry` after `common`; `None` if it does not start with `common`.
    fn prefix_of(&self, entry: &[u8]) -> Option<u64> {
        entry.strip_prefix(&*self.common).map(prefix)
    }

    /// The prefix of an entry about to be counted, if prefixes are kept; one that does not
    /// start with `common` drops them.
    fn keep_prefix(&mut self, entry: &[u8]) -> Option<u64> {
        if !self.prefixed {
            return None;
        }
        self.short |= entry.len() < self.common.len() + 8;
        let p = self.prefix_of(entry);
        if p.is_none() {
            self.drop_prefixes();
        }
        p
    }

    /// The smallest key whose prefix after `common` is `p` (`common`, then `p`'s bytes less
    /// trailing zeros): every entry of prefix `p` sorts at or after it, every entry of a
    /// smaller prefix before it.
    fn first_of_prefix(&self, p: u64) -> Vec<u8> {
        let b = p.to_be_bytes();
        let n = 8 - (p.trailing_zeros() / 8) as usize;
        [&self.common[..], &b[..n.min(8)]].concat()
    }

    /// Adds the next entry of a build, in score order ([`RankIndex::finish`] ends it).
    pub fn push(&mut self, entry: &[u8]) {
        let p = self.keep_prefix(entry);
        if self.total < ENDS as u64 {
            self.ends.head.push(entry.into());
            self.ends.bytes += entry.len() + END_OVERHEAD;
        }
        if self.expect > 0 && self.total + ENDS as u64 >= self.expect {
            self.ends.tail.push(entry.into());
            self.ends.bytes += entry.len() + END_OVERHEAD;
        }
        if self.counts.last().is_none_or(|&n| n >= BUCKET) {
            let fence: Box<[u8]> = if self.fences.is_empty() {
                Box::default()
            } else {
                entry.into()
            };
            self.bytes += fence.len() + FENCE_OVERHEAD;
            self.fences.push(fence);
            self.counts.push(0);
            if self.prefixed {
                self.prefixes.push(Vec::with_capacity(BUCKET as usize));
                self.bytes += PREFIXES_OVERHEAD;
            }
        }
        *self.counts.last_mut().expect("a bucket was pushed") += 1;
        if let Some(p) = p {
            let last = self.prefixes.last_mut().expect("a bucket was pushed");
            last.push(p);
            self.bytes += PREFIX_BYTES;
        }
        self.total += 1;
        self.raise_ceiling(entry);
    }

    /// The index of the entries pushed, ready for queries and edits.
    pub fn finish(mut self) -> RankIndex {
        self.sum_counts();
        self
    }

    /// Builds the Fenwick tree of the counts afresh.
    fn sum_counts(&mut self) {
        let n = self.counts.len();
        self.sums = self.counts.iter().map(|&c| u64::from(c)).collect();
        for i in 1..=n {
            let parent = i + (i & i.wrapping_neg());
            if parent <= n {
                self.sums[parent - 1] += self.sums[i - 1];
            }
        }
    }

    fn raise_ceiling(&mut self, entry: &[u8]) {
        if *entry > *self.ceiling {
            self.ceiling = entry.into();
        }
    }

    /// A last bucket, fenced at `entry` (past every entry counted), holding it: appends by a
    /// growing score or member fill new buckets instead of one that outgrows [`MAX_BUCKET`].
    fn open_bucket(&mut self, entry: &[u8], p: Option<u64>) {
        // The Fenwick node of the new bucket (1-based `n`) sums the buckets after node
        // `n - lowbit(n)` up to it.
        let n = self.counts.len() + 1;
        let covered = self.before(n - 1) - self.before(n - (n & n.wrapping_neg()));
        self.fences.push(entry.into());
        self.counts.push(1);
        self.sums.push(covered + 1);
        self.total += 1;
        self.bytes += entry.len() + FENCE_OVERHEAD;
        if let Some(p) = p {
            self.prefixes.push(vec![p]);
            self.bytes += PREFIXES_OVERHEAD + PREFIX_BYTES;
        }
    }

    /// Drops bucket `i` (empty, not the last): the bucket before it takes its range, or for
    /// the first the next becomes the first, its fence kept. Removals that empty a region
    /// leave no fences behind, and the front of a sliding window is sought at its first live
    /// bucket, not at the start of the deleted members' tombstones. (The last stays for the
    /// appends to come: an append and a removal of it in turn would otherwise rebuild the
    /// sums each time.)
    fn close_bucket(&mut self, i: usize) {
        let fence = self.fences.remove(i);
        self.counts.remove(i);
        self.bytes -= fence.len() + FENCE_OVERHEAD;
        if self.prefixed {
            self.prefixes.remove(i);
            self.bytes -= PREFIXES_OVERHEAD;
        }
        self.sum_counts();
    }

    /// The entries counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    fn bucket_of(&self, entry: &[u8]) -> usize {
        self.fences
            .partition_point(|f| **f <= *entry)
            .saturating_sub(1)
    }

    /// The entries of buckets `0..i`.
    fn before(&self, i: usize) -> u64 {
        let (mut i, mut sum) = (i, 0);
        while i > 0 {
            sum += self.sums[i - 1];
            i &= i - 1;
        }
        sum
    }

    fn add(&mut self, bucket: usize, delta: i64) {
        self.counts[bucket] = self.counts[bucket].saturating_add_signed(delta as i32);
        self.total = self.total.saturating_add_signed(delta);
        let mut i = bucket + 1;
        while i <= self.sums.len() {
            self.sums[i - 1] = self.sums[i - 1].saturating_add_signed(delta);
            i += i & i.wrapping_neg();
        }
    }

    /// A committed write removed the entry `removed` and added `added`. False if a bucket
    /// outgrew [`MAX_BUCKET`] or the index is empty: the index must be dropped.
    pub fn apply(&mut self, removed: Option<&[u8]>, added: Option<&[u8]>) -> bool {
        if self.counts.is_empty() {
            return false;
        }
        if let Some(e) = removed {
            let i = self.bucket_of(e);
            if self.counts[i] == 0 {
                return false; // not an entry this index counted
            }
            if self.prefixed {
                let found = self
                    .prefix_of(e)
                    .map(|p| self.prefixes[i].binary_search(&p));
                let Some(Ok(at)) = found else {
                    return false; // not an entry this index counted
                };
                self.prefixes[i].remove(at);
                self.bytes -= PREFIX_BYTES;
            }
            self.ends.remove(e);
            self.add(i, -1);
            if self.counts[i] == 0 && i + 1 < self.counts.len() {
                self.close_bucket(i);
            }
        }
        if let Some(e) = added {
            let p = self.keep_prefix(e);
            self.ends.add(e, self.total);
            if *e > *self.ceiling && self.counts.last().is_some_and(|&n| n >= BUCKET) {
                self.open_bucket(e, p);
            } else {
                if *e < *self.fences[0] {
                    self.bytes = self.bytes + e.len() - self.fences[0].len();
                    self.fences[0] = e.into();
                }
                let i = self.bucket_of(e);
                self.add(i, 1);
                if let Some(p) = p {
                    let at = self.prefixes[i].partition_point(|&q| q <= p);
                    self.prefixes[i].insert(at, p);
                    self.bytes += PREFIX_BYTES;
                }
                if self.counts[i] > MAX_BUCKET {
                    return false;
                }
            }
            self.raise_ceiling(e);
        }
        true
    }

    /// The bucket an entry or bound `at` falls in: the entries before `at` are `before` plus
    /// those of the bucket before it, as `within` tells or a walk counts.
    pub fn locate(&self, at: &[u8]) -> Located<'_> {
        let i = self.bucket_of(at);
        let within = self.within_at(i, at, false);
        self.located(i, within)
    }

    /// [`RankIndex::locate`] of an entry the index counts (a member's own): a prefix it
    /// shares with no other entry of its bucket places it.
    pub fn locate_entry(&self, entry: &[u8]) -> Located<'_> {
        let i = self.bucket_of(entry);
        let within = self.within_at(i, entry, true);
        self.located(i, within)
    }

    /// Bucket `i` (any `i` if there are none), the place in it `within`.
    fn located(&self, i: usize, within: Within) -> Located<'_> {
        if self.counts.is_empty() {
            return Located {
                fence: &[],
                before: 0,
                len: 0,
                end: None,
                within: Within::From {
                    skip: 0,
                    seek: None,
                    walk: 0,
                },
            };
        }
        Located {
            fence: &self.fences[i],
            before: self.before(i),
            len: self.counts[i],
            end: self.fences.get(i + 1).map(|f| &f[..]),
            within,
        }
    }

    /// Where bound `at` falls in bucket `i`, by the bucket's prefixes: the entries of smaller
    /// prefixes sort before it, those of greater ones after it, and those of its own
    /// (ties) too when `at` is no longer than a prefix and no entry is shorter, or when `at`
    /// is `counted` (an entry of the bucket) and the one entry of its prefix.
    fn within_at(&self, i: usize, at: &[u8], counted: bool) -> Within {
        let Some(prefixes) = self.prefixes.get(i) else {
            return self.walk_bucket(i, u32::MAX);
        };
        let Some(rest) = at.strip_prefix(&*self.common) else {
            // Without the bytes every entry starts with, `at` sorts before them all or after.
            return Within::Exact(if *at < *self.common {
                0
            } else {
                self.counts[i]
            });
        };
        let p = prefix(rest);
        let lo = prefixes.partition_point(|&q| q < p);
        let ties = prefixes[lo..].partition_point(|&q| q == p);
        if ties == 0 || (ties == 1 && counted) || (rest.len() <= 8 && !self.short) {
            return Within::Exact(lo as u32);
        }
        self.walk_from_prefix(i, p, lo, ties as u32)
    }

    /// A walk of at most `walk` entries from bucket `i`'s fence (no prefixes kept).
    fn walk_bucket(&self, i: usize, walk: u32) -> Within {
        Within::From {
            skip: 0,
            seek: None,
            walk: walk.min(self.counts.get(i).copied().unwrap_or(0)),
        }
    }

    /// A walk of at most `walk` entries from the first of bucket `i`'s entries of prefix `p`,
    /// `lo` of them before it.
    fn walk_from_prefix(&self, i: usize, p: u64, lo: usize, walk: u32) -> Within {
        let key = self.first_of_prefix(p);
        // A tie of the bucket before may sort at or after the key: then the walk starts at
        // the fence (and no entry of this bucket sorts before the key: `lo` is 0).
        let seek = (*key > *self.fences[i]).then_some(key);
        Within::From {
            skip: lo as u32,
            seek,
            walk,
        }
    }

    /// The bucket holding the entry of 0-based rank `rank` (or the last bucket if there is
    /// none): that entry is the `rank - before - skip`th from `within`'s seek.
    pub fn locate_rank(&self, rank: u64) -> Located<'_> {
        let n = self.sums.len();
        if n == 0 {
            return self.located(0, self.walk_bucket(0, 0));
        }
        // The Fenwick descent: the most buckets whose entries together are <= rank.
        let (mut pos, mut rest) = (0usize, rank);
        let mut step = n.next_power_of_two();
        while step > 0 {
            if pos + step <= n && self.sums[pos + step - 1] <= rest {
                pos += step;
                rest -= self.sums[pos - 1];
            }
            step >>= 1;
        }
        let i = pos.min(n - 1);
        let k = rank - self.before(i);
        // The entry is the `k`th of the bucket: sought at its prefix's first entry.
        let within = match self.prefixes.get(i).and_then(|p| p.get(k as usize)) {
            Some(&p) => {
                let lo = self.prefixes[i].partition_point(|&q| q < p);
                self.walk_from_prefix(i, p, lo, (k - lo as u64) as u32)
            }
            None => self.walk_bucket(i, u32::try_from(k).unwrap_or(u32::MAX)),
        };
        self.located(i, within)
    }

    /// Splits the bucket fenced at `fence`, which a reader walked and found to hold `len`
    /// entries, at `fences`: the entries it met at every [`BUCKET`]th place after the first, in
    /// order. The parts hold [`BUCKET`] entries each and the last the rest (a rest under half a
    /// bucket stays with the part before). False, nothing changed, unless that bucket holds
    /// `len` entries now and the fences fall inside it in order (another reader split it
    /// first, or the walk disagrees).
    pub fn split(&mut self, fence: &[u8], len: u32, mut fences: Vec<Box<[u8]>>) -> bool {
        if self.counts.is_empty() {
            return false;
        }
        let i = self.bucket_of(fence);
        let end = self.fences.get(i + 1);
        let inside = *self.fences[i] == *fence
            && self.counts[i] == len
            && fences.first().is_some_and(|f| *f > self.fences[i])
            && fences.windows(2).all(|w| w[0] < w[1])
            && fences.last().is_some_and(|f| end.is_none_or(|e| *f < *e));
        let whole_parts = BUCKET * fences.len() as u32;
        if !inside || len <= whole_parts {
            return false;
        }
        if len - whole_parts < BUCKET / 2 {
            fences.pop();
        }
        if fences.is_empty() {
            return false;
        }
        let parts = fences.len();
        let mut counts = vec![BUCKET; parts + 1];
        counts[parts] = len - BUCKET * parts as u32;
        self.bytes += fences
            .iter()
            .map(|f| f.len() + FENCE_OVERHEAD)
            .sum::<usize>();
        if self.prefixed {
            // Sorted entries have sorted prefixes: the parts' prefixes are the bucket's in
            // runs of the parts' counts.
            let whole = std::mem::take(&mut self.prefixes[i]);
            let mut rest = &whole[..];
            let split: Vec<Vec<u64>> = counts
                .iter()
                .map(|&n| {
                    let (part, after) = rest.split_at(n as usize);
                    rest = after;
                    part.to_vec()
                })
                .collect();
            self.bytes += parts * PREFIXES_OVERHEAD;
            self.prefixes.splice(i..i + 1, split);
        }
        self.fences.splice(i + 1..i + 1, fences);
        self.counts.splice(i..i + 1, counts);
        self.sum_counts();
        true
    }

    /// The entries of ascending ranks `lo..=hi` (`lo <= hi`), if one end holds them all.
    pub fn at_ends(&self, lo: u64, hi: u64) -> Option<&[Box<[u8]>]> {
        let (head, tail) = (&self.ends.head, &self.ends.tail);
        if hi < head.len() as u64 {
            return Some(&head[lo as usize..=hi as usize]);
        }
        let first = self.total.checked_sub(tail.len() as u64)?;
        (lo >= first && hi < self.total)
            .then(|| &tail[(lo - first) as usize..=(hi - first) as usize])
    }

    /// Bytes counted against the table's budget.
    pub fn bytes(&self) -> usize {
        self.bytes + self.ends.bytes + std::mem::size_of::<Self>()
    }
}

struct Held {
    index: RankIndex,
    last_used: u64,
}

#[derive(Default)]
struct Table {
    by_gen: HashMap<u64, Held, FastHash>,
    bytes: usize,
    clock: u64,
    /// Generations whose index outgrew the budget while being built (the last few).
    refused: std::collections::VecDeque<u64>,
}

/// Refused generations remembered.
const REFUSED: usize = 64;

impl Table {
    fn remove(&mut self, gen: u64) {
        if let Some(h) = self.by_gen.remove(&gen) {
            self.bytes -= h.index.bytes();
        }
    }

    /// Drops the least recently used indexes while all of them take more than `budget` bytes.
    fn trim(&mut self, budget: usize) {
        while self.bytes > budget {
            let Some(oldest) = self
                .by_gen
                .iter()
                .min_by_key(|(_, h)| h.last_used)
                .map(|(&g, _)| g)
            else {
                break;
            };
            self.remove(oldest);
        }
    }
}

/// The rank indexes of the collections cached as [`super::BigColl`], by generation.
pub struct RankIndexes {
    table: Mutex<Table>,
    /// Generations whose index one reader is building now, and the signal that a build
    /// ended: the other readers that need it wait for it instead of each walking the whole
    /// collection (a restart or a dropped entry under load).
    building: Mutex<HashSet<u64>>,
    build_ended: Condvar,
    builds: AtomicU64,
    answers: AtomicU64,
    refusals: AtomicU64,
    splits: AtomicU64,
    build_waits: AtomicU64,
    placed: AtomicU64,
}

/// One reader's claim to build an index ([`RankIndexes::claim_build`]); dropping it wakes
/// the readers waiting for that build.
pub struct BuildClaim<'a> {
    indexes: &'a RankIndexes,
    gen: u64,
}

impl Drop for BuildClaim<'_> {
    fn drop(&mut self) {
        self.indexes.building.lock().remove(&self.gen);
        self.indexes.build_ended.notify_all();
    }
}

/// Counters for INFO.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RankStats {
    /// Indexes held now, and their bytes.
    pub indexes: usize,
    pub bytes: usize,
    /// Indexes built (each a walk of its whole set) and queries answered through one.
    pub builds: u64,
    pub answers: u64,
    /// Builds stopped because the index outgrew the budget.
    pub refusals: u64,
    /// Buckets split by the query that walked them.
    pub splits: u64,
    /// Queries that waited for another's build of the index they needed.
    pub build_waits: u64,
    /// Places in a bucket found from its prefixes alone, without a seek ([`Within::Exact`]).
    pub placed: u64,
}

impl RankIndexes {
    pub fn new() -> RankIndexes {
        RankIndexes {
            table: Mutex::new(Table::default()),
            building: Mutex::new(HashSet::new()),
            build_ended: Condvar::new(),
            builds: AtomicU64::new(0),
            answers: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            splits: AtomicU64::new(0),
            build_waits: AtomicU64::new(0),
            placed: AtomicU64::new(0),
        }
    }

    /// Counts a query answered through an index.
    pub fn note_answer(&self) {
        self.answers.fetch_add(1, Relaxed);
    }

    /// Counts a place found from an index's prefixes alone.
    pub fn note_placed(&self) {
        self.placed.fetch_add(1, Relaxed);
    }

    /// Runs `f` on the index of generation `gen`, if there is one.
    pub fn with<R>(&self, gen: u64, f: impl FnOnce(&RankIndex) -> R) -> Option<R> {
        let mut t = self.table.lock();
        t.clock += 1;
        let now = t.clock;
        let held = t.by_gen.get_mut(&gen)?;
        held.last_used = now;
        Some(f(&held.index))
    }

    /// Claims the build of generation `gen`'s index: the claim for the first reader to ask
    /// (it ends when dropped), `None` for the others once that build ended or `wait` passed;
    /// they look for the index again.
    pub fn claim_build(&self, gen: u64, wait: Duration) -> Option<BuildClaim<'_>> {
        let mut building = self.building.lock();
        if building.insert(gen) {
            return Some(BuildClaim { indexes: self, gen });
        }
        self.build_waits.fetch_add(1, Relaxed);
        let deadline = Instant::now() + wait;
        while building.contains(&gen) {
            if self
                .build_ended
                .wait_until(&mut building, deadline)
                .timed_out()
            {
                break;
            }
        }
        None
    }

    /// Installs `index` for generation `gen` if `still_valid()` holds, checked under the
    /// table's lock (a write's edits, applied under it, then come after the install), and
    /// drops the least recently used indexes while all of them take more than `budget` bytes.
    pub fn install(
        &self,
        gen: u64,
        index: RankIndex,
        budget: usize,
        still_valid: impl FnOnce() -> bool,
    ) -> bool {
        let mut t = self.table.lock();
        if index.bytes() > budget || !still_valid() {
            return false;
        }
        t.remove(gen);
        self.builds.fetch_add(1, Relaxed);
        t.clock += 1;
        t.bytes += index.bytes();
        let last_used = t.clock;
        t.by_gen.insert(gen, Held { index, last_used });
        t.trim(budget);
        true
    }

    /// Splits a bucket of generation `gen`'s index as [`RankIndex::split`] does, if
    /// `still_valid()` holds, checked under the table's lock as [`RankIndexes::install`]
    /// checks it (the walk that found the fences saw the entries the index counts), then
    /// keeps all indexes within `budget` bytes.
    pub fn split(
        &self,
        gen: u64,
        fence: &[u8],
        len: u32,
        fences: Vec<Box<[u8]>>,
        budget: usize,
        still_valid: impl FnOnce() -> bool,
    ) -> bool {
        let mut t = self.table.lock();
        if !still_valid() {
            return false;
        }
        let Some(held) = t.by_gen.get_mut(&gen) else {
            return false;
        };
        let was = held.index.bytes();
        if !held.index.split(fence, len, fences) {
            return false;
        }
        let now = held.index.bytes();
        t.bytes = t.bytes - was + now;
        self.splits.fetch_add(1, Relaxed);
        t.trim(budget);
        true
    }

    /// A committed write's edits of the score index of the set cached under `gen`, in order:
    /// (entry removed, entry added). Called by the commit before the set's entry is served
    /// again. The table's bytes follow the fences the edits open and close.
    pub fn apply(&self, gen: u64, edits: &[IndexEdit]) {
        let mut t = self.table.lock();
        let Some(held) = t.by_gen.get_mut(&gen) else {
            return;
        };
        let was = held.index.bytes();
        let kept = edits
            .iter()
            .all(|(r, a)| held.index.apply(r.as_deref(), a.as_deref()));
        let now = held.index.bytes();
        t.bytes = t.bytes - was + now;
        if !kept {
            t.remove(gen);
        }
    }

    /// Notes that the index of `gen` outgrew the budget: it is not built again.
    pub fn refuse(&self, gen: u64) {
        self.refusals.fetch_add(1, Relaxed);
        let mut t = self.table.lock();
        if t.refused.len() == REFUSED {
            t.refused.pop_front();
        }
        t.refused.push_back(gen);
    }

    /// Whether the index of `gen` outgrew the budget.
    pub fn refused(&self, gen: u64) -> bool {
        self.table.lock().refused.contains(&gen)
    }

    /// Drops the index of `gen` (it disagreed with the set it describes).
    pub fn drop_index(&self, gen: u64) {
        self.table.lock().remove(gen);
    }

    /// Drops every index (the cache was cleared).
    pub fn clear(&self) {
        let mut t = self.table.lock();
        t.by_gen.clear();
        t.refused.clear();
        t.bytes = 0;
    }

    pub fn stats(&self) -> RankStats {
        let t = self.table.lock();
        RankStats {
            indexes: t.by_gen.len(),
            bytes: t.bytes,
            builds: self.builds.load(Relaxed),
            answers: self.answers.load(Relaxed),
            refusals: self.refusals.load(Relaxed),
            splits: self.splits.load(Relaxed),
            build_waits: self.build_waits.load(Relaxed),
            placed: self.placed.load(Relaxed),
        }
    }
}

impl Default for RankIndexes {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn entry(n: u32) -> Vec<u8> {
        n.to_be_bytes().to_vec()
    }

    fn built(entries: &BTreeSet<Vec<u8>>) -> RankIndex {
        built_with(entries, true)
    }

    /// An index of `entries` as `cmd::ranked` builds one: with prefixes after the bytes the
    /// first and last entries share if `prefixed`.
    fn built_with(entries: &BTreeSet<Vec<u8>>, prefixed: bool) -> RankIndex {
        let mut idx = RankIndex::building(entries.len() as u64, prefixed);
        if let (Some(a), Some(b)) = (entries.first(), entries.last()) {
            idx = idx.sharing(&a[..shared_start(a, b)]);
        }
        for e in entries {
            idx.push(e);
        }
        idx.finish()
    }

    /// The rank the index gives `at` as `cmd::ranked` counts it: the buckets before, what the
    /// prefixes tell, and a walk from where they leave off (no longer than they say).
    fn rank_of(idx: &RankIndex, set: &BTreeSet<Vec<u8>>, at: &[u8]) -> u64 {
        rank_from(idx.locate(at), set, at)
    }

    /// [`rank_of`] for an entry of `set`, placed as one ([`RankIndex::locate_entry`]).
    fn rank_of_entry(idx: &RankIndex, set: &BTreeSet<Vec<u8>>, e: &[u8]) -> u64 {
        assert!(set.contains(e));
        rank_from(idx.locate_entry(e), set, e)
    }

    fn rank_from(l: Located<'_>, set: &BTreeSet<Vec<u8>>, at: &[u8]) -> u64 {
        match l.within {
            Within::Exact(k) => l.before + u64::from(k),
            Within::From { skip, seek, walk } => {
                let from = seek.unwrap_or_else(|| l.fence.to_vec());
                let n = set.range(from..).take_while(|e| e.as_slice() < at).count();
                assert!(n <= walk as usize, "walked {n}, told at most {walk}");
                l.before + u64::from(skip) + n as u64
            }
        }
    }

    /// The entry the index finds at `rank`: sought where it says, then stepped to.
    fn entry_at<'s>(idx: &RankIndex, set: &'s BTreeSet<Vec<u8>>, rank: u64) -> Option<&'s Vec<u8>> {
        let l = idx.locate_rank(rank);
        let Within::From { skip, seek, walk } = l.within else {
            panic!("a rank is always walked to");
        };
        let steps = rank - l.before - u64::from(skip);
        assert!(
            steps <= u64::from(walk),
            "{steps} steps, told at most {walk}"
        );
        let from = seek.unwrap_or_else(|| l.fence.to_vec());
        set.range(from..).nth(steps as usize)
    }

    /// Every `step`th entry of `set`: its rank as the index counts it, and the entry the index
    /// finds at that rank.
    fn assert_ranks(idx: &RankIndex, set: &BTreeSet<Vec<u8>>, step: usize) {
        for (rank, e) in set.iter().enumerate().step_by(step) {
            assert_eq!(rank_of(idx, set, e), rank as u64);
            assert_eq!(rank_of_entry(idx, set, e), rank as u64);
            assert_eq!(entry_at(idx, set, rank as u64), Some(e));
        }
    }

    /// The index's prefixes are its buckets' entries' prefixes, sorted, and its bytes count
    /// them.
    fn assert_prefixes(idx: &RankIndex) {
        if !idx.prefixed {
            return assert!(idx.prefixes.is_empty());
        }
        assert_eq!(idx.prefixes.len(), idx.counts.len());
        for (p, &n) in idx.prefixes.iter().zip(&idx.counts) {
            assert_eq!(p.len(), n as usize);
            assert!(p.is_sorted());
        }
        let fences: usize = idx.fences.iter().map(|f| f.len() + FENCE_OVERHEAD).sum();
        let prefixes = idx.counts.len() * PREFIXES_OVERHEAD
            + idx.total as usize * PREFIX_BYTES
            + idx.common.len();
        assert_eq!(
            idx.bytes,
            fences + prefixes,
            "the bytes counted follow the edits"
        );
        let mut without = idx.clone();
        without.drop_prefixes();
        assert_eq!(without.bytes, fences);
    }

    /// What a query that lands at `at` does (`cmd::ranked`): walks its bucket and splits it.
    fn split_at(idx: &mut RankIndex, set: &BTreeSet<Vec<u8>>, at: &[u8]) -> bool {
        let l = idx.locate(at);
        let (fence, len) = (l.fence.to_vec(), l.len);
        let end = l.end.map(<[u8]>::to_vec);
        let walked: Vec<&Vec<u8>> = set
            .range(fence.clone()..)
            .take_while(|e| end.as_ref().is_none_or(|end| *e < end))
            .collect();
        assert_eq!(
            walked.len(),
            len as usize,
            "the bucket counts what it holds"
        );
        let fences = walked
            .iter()
            .skip(BUCKET as usize)
            .step_by(BUCKET as usize)
            .map(|e| e.as_slice().into())
            .collect();
        idx.split(&fence, len, fences)
    }

    #[test]
    fn buckets_are_filled_in_order_and_ranks_add_up() {
        let set: BTreeSet<Vec<u8>> = (0..1000).map(|i| entry(i * 2)).collect();
        let idx = built(&set);
        assert_eq!(idx.total(), 1000);
        assert_eq!(idx.counts.len(), 1000usize.div_ceil(BUCKET as usize));
        assert!(idx.fences[0].is_empty());
        assert_ranks(&idx, &set, 1);
    }

    #[test]
    fn a_bucket_grown_past_the_limit_drops_the_index() {
        // Inserts between two entries (not past the last, which would open buckets).
        let mut set: BTreeSet<Vec<u8>> = (0..10).map(entry).collect();
        set.insert(entry(u32::MAX));
        let mut idx = built(&set);
        for i in 0..MAX_BUCKET - 11 {
            assert!(idx.apply(None, Some(&entry(100 + i))));
        }
        assert!(!idx.apply(None, Some(&entry(1_000_000))));
    }

    #[test]
    fn a_bucket_split_by_its_walk_keeps_inserts_at_one_place_indexed() {
        // A leaderboard's new players all join at one place: between entries 4 and 5 of a
        // built index, 20 times MAX_BUCKET inserts, each bucket split once it passes four buckets.
        let mut set: BTreeSet<Vec<u8>> = (0..4_000).map(|i| entry(i * 1_000_000)).collect();
        let mut idx = built(&set);
        let before = idx.counts.len();
        for n in 0..20 * MAX_BUCKET {
            let e = entry(4_000_000 + 1 + n);
            assert!(idx.apply(None, Some(&e)), "insert {n}");
            set.insert(e.clone());
            if idx.locate(&e).len > 4 * BUCKET {
                assert!(split_at(&mut idx, &set, &e), "split at {n}");
            }
        }
        assert_eq!(idx.total(), set.len() as u64);
        assert!(idx.counts.iter().all(|&n| n <= 4 * BUCKET));
        let parts = (20 * MAX_BUCKET / BUCKET) as usize;
        assert!(
            idx.counts.len() < before + parts * 2,
            "{} buckets for {} inserts",
            idx.counts.len(),
            20 * MAX_BUCKET
        );
        assert_ranks(&idx, &set, 101);
        // A split that disagrees with the bucket changes nothing.
        let l = idx.locate(&entry(4_000_001));
        let (fence, len) = (l.fence.to_vec(), l.len);
        let stale = vec![entry(4_000_002).into()];
        assert!(!idx.split(&fence, len + 1, stale.clone()));
        assert!(!idx.split(&entry(4_000_003), len, stale));
        assert_ranks(&idx, &set, 101);
    }

    #[test]
    fn a_sliding_window_keeps_its_index_and_a_fence_per_bucket() {
        // Entries 0..10,000, then 100,000 appended past the end while as many leave the front.
        let mut set: BTreeSet<Vec<u8>> = (0..10_000).map(entry).collect();
        let mut idx = built(&set);
        for n in 10_000..110_000u32 {
            let (new, old) = (entry(n), entry(n - 10_000));
            assert!(idx.apply(None, Some(&new)), "append {n}");
            assert!(idx.apply(Some(&old), None), "removal {}", n - 10_000);
            set.insert(new);
            set.remove(&old);
        }
        assert_eq!(idx.total(), 10_000);
        assert!(
            idx.counts.len() <= 10_000 / BUCKET as usize + 3,
            "{} buckets",
            idx.counts.len()
        );
        assert_ranks(&idx, &set, 97);
        // The first bucket was closed with the front: its successor's fence leads now, and
        // entries added below it (before the window) lower it.
        assert!(!idx.fences[0].is_empty());
        for n in (0..300u32).rev() {
            assert!(idx.apply(None, Some(&entry(n))), "prepend {n}");
            set.insert(entry(n));
        }
        assert_eq!(idx.total(), set.len() as u64);
        assert_ranks(&idx, &set, 37);
        assert_eq!(rank_of(&idx, &set, &[]), 0);
    }

    #[test]
    fn the_table_counts_the_bytes_its_indexes_grow_and_shrink_by_under_edits() {
        // Appends open buckets (fences grow the index), removals close them: the table's
        // count follows, so dropping the index leaves it at zero and a new one fits.
        let t = RankIndexes::new();
        let set: BTreeSet<Vec<u8>> = (0..1_000).map(entry).collect();
        let budget = 1 << 20;
        assert!(t.install(1, built(&set), budget, || true));
        let appends: Vec<IndexEdit> = (1_000..5_000).map(|n| (None, Some(entry(n)))).collect();
        t.apply(1, &appends);
        let grown = t.with(1, RankIndex::bytes).unwrap();
        assert!(grown > built(&set).bytes());
        assert_eq!(t.stats().bytes, grown);
        let removals: Vec<IndexEdit> = (0..4_000).map(|n| (Some(entry(n)), None)).collect();
        t.apply(1, &removals);
        assert_eq!(t.stats().bytes, t.with(1, RankIndex::bytes).unwrap());
        t.drop_index(1);
        assert_eq!(t.stats().bytes, 0);
        assert!(t.install(2, built(&set), budget, || true));
        assert_eq!(t.stats().bytes, built(&set).bytes());
        // Grown, then dropped by an edit (a bucket past MAX_BUCKET): nothing left counted.
        t.apply(2, &appends);
        let at_one_place: Vec<IndexEdit> = (0..=MAX_BUCKET)
            .map(|n| {
                let mut e = entry(5);
                e.extend_from_slice(&n.to_be_bytes());
                (None, Some(e))
            })
            .collect();
        t.apply(2, &at_one_place);
        assert!(t.with(2, |_| ()).is_none());
        assert_eq!(t.stats().bytes, 0);
    }

    #[test]
    fn the_table_drops_the_least_recently_used_over_its_budget() {
        let t = RankIndexes::new();
        let set: BTreeSet<Vec<u8>> = (0..10_000).map(entry).collect();
        let one = built(&set).bytes();
        assert!(t.install(1, built(&set), 2 * one, || true));
        assert!(t.install(2, built(&set), 2 * one, || true));
        assert!(t.with(1, |_| ()).is_some());
        assert!(t.install(3, built(&set), 2 * one, || true));
        assert!(t.with(2, |_| ()).is_none(), "2 was used least recently");
        assert!(t.with(1, |_| ()).is_some() && t.with(3, |_| ()).is_some());
        assert!(
            !t.install(4, built(&set), 2 * one, || false),
            "a raced build"
        );
        assert_eq!(t.stats().bytes, 2 * one);
        t.apply(1, &[(None, Some(entry(5)))]);
        assert_eq!(t.with(1, RankIndex::total), Some(10_001));
    }

    /// Builds an index of `start` (with prefixes if `prefixed`), applies `edits` (add or
    /// remove an entry) with a query splitting the bucket it lands in now and then (`splits`),
    /// and checks the index against the edited set: its total, the rank of each probe and of
    /// every entry, the entry at each rank, what its ends hold, and its prefixes' bytes.
    fn check_edits(
        start: BTreeSet<Vec<u8>>,
        edits: Vec<(bool, Vec<u8>)>,
        splits: Vec<Vec<u8>>,
        probes: Vec<Vec<u8>>,
        prefixed: bool,
    ) -> Result<(), TestCaseError> {
        let mut set = start;
        let mut idx = built_with(&set, prefixed);
        let every = edits.len() / (splits.len() + 1) + 1;
        for (i, (add, e)) in edits.into_iter().enumerate() {
            let applied = match (add, set.contains(&e)) {
                (true, false) => {
                    set.insert(e.clone());
                    idx.apply(None, Some(&e))
                }
                (false, true) => {
                    set.remove(&e);
                    idx.apply(Some(&e), None)
                }
                _ => true,
            };
            if !applied {
                // Dropped (an empty build, or a bucket grown too far): built again.
                idx = built_with(&set, prefixed);
            }
            // Now and then a query splits the bucket it lands in, if big enough to split.
            if let Some(at) = splits.get(i / every).filter(|_| i % every == 0) {
                if idx.total() > 0 && idx.locate(at).len >= BUCKET + BUCKET / 2 {
                    prop_assert!(split_at(&mut idx, &set, at));
                }
            }
        }
        prop_assert_eq!(idx.total(), set.len() as u64);
        prop_assert_eq!(
            idx.total(),
            idx.counts.iter().map(|&n| u64::from(n)).sum::<u64>()
        );
        assert_prefixes(&idx);
        for at in &probes {
            prop_assert_eq!(
                rank_of(&idx, &set, at),
                set.range(..at.clone()).count() as u64
            );
        }
        for (rank, e) in set.iter().enumerate() {
            prop_assert_eq!(rank_of(&idx, &set, e), rank as u64);
            prop_assert_eq!(rank_of_entry(&idx, &set, e), rank as u64);
            prop_assert_eq!(entry_at(&idx, &set, rank as u64), Some(e));
        }
        // What the ends hold is exactly the entries at those ranks.
        let all: Vec<&Vec<u8>> = set.iter().collect();
        let len = all.len() as u64;
        for (lo, n) in [
            (0, 10),
            (0, 1),
            (5, 3),
            (len.saturating_sub(10), 10),
            (len / 2, 4),
        ] {
            let hi = (lo + n - 1).min(len.saturating_sub(1));
            if lo > hi || len == 0 {
                continue;
            }
            if let Some(held) = idx.at_ends(lo, hi) {
                let want = &all[lo as usize..=hi as usize];
                prop_assert_eq!(held.len(), want.len());
                for (h, w) in held.iter().zip(want) {
                    prop_assert_eq!(&h[..], &w[..]);
                }
            }
        }
        prop_assert!(idx.ends.head.len() <= 2 * ENDS && idx.ends.tail.len() <= 2 * ENDS);
        Ok(())
    }

    /// A sorted set's score-index entry: a score of few values (many ties) and a member.
    fn scored(score: u8, member: u16) -> Vec<u8> {
        let mut e = (u64::from(score) << 40).to_be_bytes().to_vec();
        e.extend_from_slice(&member.to_be_bytes()[..usize::from(member % 3)]);
        e
    }

    /// Bytes of a small alphabet and any length: short entries, shared prefixes, zeros.
    fn few_bytes() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(0u8..3, 0..11)
    }

    proptest! {
        /// After any edits, the index's ranks are the true ranks of the edited set, with and
        /// without prefixes.
        #[test]
        fn ranks_stay_exact_under_edits(
            start in proptest::collection::btree_set(0u32..5000, 0..2000),
            edits in proptest::collection::vec((any::<bool>(), 0u32..5000), 0..600),
            splits in proptest::collection::vec(0u32..5000, 0..20),
            prefixed in any::<bool>(),
        ) {
            check_edits(
                start.iter().map(|&n| entry(n)).collect(),
                edits.into_iter().map(|(add, n)| (add, entry(n))).collect(),
                splits.into_iter().map(entry).collect(),
                (0..5000).step_by(37).map(entry).collect(),
                prefixed,
            )?;
        }

        /// Scores shared by many members: counts to a score are placed by the prefixes alone,
        /// ranks walk the ties only.
        #[test]
        fn ranks_among_tied_scores_stay_exact_under_edits(
            start in proptest::collection::btree_set((0u8..20, any::<u16>()), 0..1500),
            edits in proptest::collection::vec((any::<bool>(), 0u8..20, any::<u16>()), 0..500),
            splits in proptest::collection::vec((0u8..20, any::<u16>()), 0..20),
        ) {
            let probes = (0..=20u8)
                .flat_map(|s| [scored(s, 0), scored(s, 1)[..8].to_vec(), scored(s, 2)])
                .collect();
            check_edits(
                start.into_iter().map(|(s, m)| scored(s, m)).collect(),
                edits.into_iter().map(|(add, s, m)| (add, scored(s, m))).collect(),
                splits.into_iter().map(|(s, m)| scored(s, m)).collect(),
                probes,
                true,
            )?;
        }

        /// Members that share their first bytes (`element:` and zeros): the prefixes are taken
        /// after them; an entry added without them drops the prefixes; bounds without them
        /// sort before or after every entry.
        #[test]
        fn ranks_after_a_shared_start_stay_exact_under_edits(
            start in proptest::collection::btree_set(few_bytes(), 0..1500),
            edits in proptest::collection::vec((0u8..20, few_bytes()), 0..500),
            splits in proptest::collection::vec(few_bytes(), 0..20),
            probes in proptest::collection::vec(few_bytes(), 0..50),
        ) {
            let named = |b: Vec<u8>| [&b"element:00"[..], &b].concat();
            let mut probes: Vec<Vec<u8>> = probes.into_iter().map(named).collect();
            for p in [&b""[..], b"a", b"element", b"element:", b"element:0", b"element:1", b"z"] {
                probes.push(p.to_vec());
            }
            check_edits(
                start.into_iter().map(named).collect(),
                // Now and then an entry without the shared start.
                edits
                    .into_iter()
                    .map(|(k, b)| match k {
                        0 => (true, [&b"elem"[..], &b].concat()),
                        k => (k % 2 == 0, named(b)),
                    })
                    .collect(),
                splits.into_iter().map(named).collect(),
                probes,
                true,
            )?;
        }

        /// Entries shorter than a prefix, and prefixes that end in zeros.
        #[test]
        fn ranks_of_short_entries_stay_exact_under_edits(
            start in proptest::collection::btree_set(few_bytes(), 0..1500),
            edits in proptest::collection::vec((any::<bool>(), few_bytes()), 0..500),
            splits in proptest::collection::vec(few_bytes(), 0..20),
            probes in proptest::collection::vec(few_bytes(), 0..50),
        ) {
            check_edits(start, edits, splits, probes, true)?;
        }

        /// A fresh build holds both ends; a top ten stays held through edits at the top.
        #[test]
        fn the_ends_follow_edits_at_the_top(
            start in proptest::collection::btree_set(0u32..100_000, 200..1000),
            edits in proptest::collection::vec((any::<bool>(), 90_000u32..100_000), 0..300),
        ) {
            let mut set: BTreeSet<Vec<u8>> = start.iter().map(|&n| entry(n)).collect();
            let mut idx = built(&set);
            let len = set.len() as u64;
            prop_assert!(idx.at_ends(0, 9).is_some());
            prop_assert!(idx.at_ends(len - 10, len - 1).is_some());
            for (add, n) in edits {
                let e = entry(n);
                match (add, set.contains(&e)) {
                    (true, false) => {
                        set.insert(e.clone());
                        prop_assert!(idx.apply(None, Some(&e)));
                    }
                    (false, true) if set.len() > 100 => {
                        set.remove(&e);
                        prop_assert!(idx.apply(Some(&e), None));
                    }
                    _ => {}
                }
                let len = set.len() as u64;
                let want: Vec<&Vec<u8>> = set.iter().rev().take(10).rev().collect();
                if let Some(held) = idx.at_ends(len - 10, len - 1) {
                    prop_assert_eq!(held.iter().map(|h| h.to_vec()).collect::<Vec<_>>(),
                        want.into_iter().cloned().collect::<Vec<_>>());
                }
            }
        }
    }
}
