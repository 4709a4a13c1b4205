//! Admission for the hot cache: a full shard takes a key a read just missed only if that key
//! has been asked for more often, lately, than the entry it would evict (TinyLFU, Einziger and
//! Friedman). Without it every miss of a long tail of once-read keys evicts an entry, and the
//! keys that matter are pushed out by keys that never come back: at 10M keys under zipf 0.99
//! with a 1.5% cache the sampled LFU alone held 61% of the requests where the best possible
//! was 69%.
//!
//! The "how often" is a count-min sketch per shard: four 4-bit counters per key (saturating at
//! 15, two to a byte), picked from the key's hash, bumped by every lookup, hit or miss, and all
//! halved after every `10 x counters` bumps so that old popularity fades. A key's four counters
//! lie in one 64-byte block (one cache line; a "blocked" sketch, as Caffeine's), each in its own
//! quarter of it: a lookup costs one cache miss, not four (four were 3.5% of the server's CPU
//! under GET hits over 100k keys).
//!
//! Its size decides how well it tells a key of the hot set's edge from the long tail. At 10M
//! keys under zipf 0.99 with a 1.5% cache, one byte-wide counter per 64 bytes of budget (about
//! three per entry, 1.6% of the budget) held 65.2% of the requests in the cache's simulation
//! (`cache::sim::at_scale_against_the_best_possible`): the tail's bumps filled every counter,
//! so the counts of the keys at the hot set's edge were mostly noise. One 4-bit counter per
//! 8 bytes (about 27 per entry, 6.25% of the budget) holds 68.2%, where knowing the ranks would
//! hold 68.9% with as many entries; one per 16 bytes held 66.9%, one per 4 bytes 68.0% (its
//! sketch takes the entries' room).

/// Bytes of a shard's budget per counter (about 27 counters per cached short string).
const BUDGET_BYTES_PER_COUNTER: usize = 8;
const MIN_BLOCKS: usize = 4;
const MAX_COUNT: u8 = 15;
/// Bumps per counter between halvings (5 and 20 held as many requests).
const SAMPLE_FACTOR: usize = 10;
/// Bytes per block (one cache line), and counters per quarter of a block (two per byte).
const BLOCK: usize = 64;
const QUARTER_COUNTERS: usize = BLOCK * 2 / 4;

/// Blocks of the sketch of a shard whose share of `cache-maxmemory` is `share` bytes.
fn blocks_for(share: usize) -> usize {
    (share / BUDGET_BYTES_PER_COUNTER / (BLOCK * 2)).max(MIN_BLOCKS)
}

/// Bytes of the sketch of a shard whose share of `cache-maxmemory` is `share` bytes (about
/// 6.25% of it): what the shard's entries may not use.
pub fn bytes_for(share: usize) -> usize {
    blocks_for(share) * BLOCK
}

/// One cache line of counters, two to a byte.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Block([u8; BLOCK]);

impl Block {
    fn get(&self, counter: usize) -> u8 {
        (self.0[counter / 2] >> (4 * (counter % 2))) & 0xF
    }

    fn bump(&mut self, counter: usize) {
        if self.get(counter) < MAX_COUNT {
            self.0[counter / 2] += 1 << (4 * (counter % 2));
        }
    }

    fn halve(&mut self) {
        for b in &mut self.0 {
            *b = (*b >> 1) & 0x77;
        }
    }
}

#[derive(Default)]
pub struct Sketch {
    blocks: Vec<Block>,
    bumps: usize,
}

impl Sketch {
    /// Sizes the sketch for a shard whose share of the cache is `share` bytes (counts
    /// restart when that changes its size).
    pub fn fit(&mut self, share: usize) {
        let blocks = blocks_for(share);
        if self.blocks.len() != blocks {
            self.blocks = vec![Block([0; BLOCK]); blocks];
            self.bumps = 0;
        }
    }

    fn counters(&self) -> usize {
        self.blocks.len() * BLOCK * 2
    }

    /// The key's block, and its four counters there (one in each quarter). The hash is mixed
    /// first: its low bits chose the shard, so they are the same for every key here. The block
    /// comes from the top half of the mix (scaled to the block count, which need not be a power
    /// of two), the counters from lower bits, so they vary independently.
    fn slots(&self, hash: u64) -> (usize, [usize; 4]) {
        let h = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let block = (((h >> 32) * self.blocks.len() as u64) >> 32) as usize;
        let at = [0, 1, 2, 3]
            .map(|i| i * QUARTER_COUNTERS + (h >> (8 + 5 * i)) as usize % QUARTER_COUNTERS);
        (block, at)
    }

    /// Counts one lookup of the key hashing to `hash`.
    pub fn touch(&mut self, hash: u64) {
        if self.blocks.is_empty() {
            return;
        }
        let (b, at) = self.slots(hash);
        let block = &mut self.blocks[b];
        for i in at {
            block.bump(i);
        }
        self.bumps += 1;
        if self.bumps >= SAMPLE_FACTOR * self.counters() {
            self.blocks.iter_mut().for_each(Block::halve);
            self.bumps /= 2;
        }
    }

    /// Recent lookups of the key hashing to `hash` (an over-estimate, never an under-).
    pub fn estimate(&self, hash: u64) -> u8 {
        if self.blocks.is_empty() {
            return 0;
        }
        let (b, at) = self.slots(hash);
        let block = &self.blocks[b];
        at.into_iter().map(|i| block.get(i)).min().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(i: u64) -> u64 {
        let mut x = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    #[test]
    fn frequent_keys_estimate_higher_than_rare_ones() {
        let mut s = Sketch::default();
        s.fit(1 << 20);
        for round in 0..10 {
            for k in 0..100 {
                s.touch(h(k)); // hot: every round
            }
            s.touch(h(1000 + round)); // cold: once
        }
        let hot = (0..100).map(|k| s.estimate(h(k))).min().unwrap();
        let cold = (1000..1010).map(|k| s.estimate(h(k))).max().unwrap();
        assert!(hot >= 10, "hot {hot}");
        assert!(cold <= 2, "cold {cold}");
        assert_eq!(s.estimate(h(5000)), 0, "never seen");
    }

    #[test]
    fn two_counters_share_a_byte_without_spilling_into_each_other() {
        let mut b = Block([0; BLOCK]);
        for _ in 0..40 {
            b.bump(6);
        }
        b.bump(7);
        assert_eq!((b.get(6), b.get(7), b.get(5), b.get(8)), (15, 1, 0, 0));
        b.halve();
        assert_eq!((b.get(6), b.get(7)), (7, 0));
        assert_eq!(
            bytes_for(1 << 20),
            (1 << 20) / 16,
            "a sixteenth of the budget"
        );
    }

    #[test]
    fn counts_fade() {
        let mut s = Sketch::default();
        s.fit(0);
        for _ in 0..20 {
            s.touch(h(1));
        }
        assert_eq!(s.estimate(h(1)), 15, "saturates");
        for k in 0..(SAMPLE_FACTOR * s.counters()) as u64 {
            s.touch(h(10_000 + k));
        }
        assert!(s.estimate(h(1)) <= 8, "{}", s.estimate(h(1)));
    }
}
