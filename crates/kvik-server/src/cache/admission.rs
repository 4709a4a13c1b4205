//! Admission for the hot cache: a full shard takes a key a read just missed only if that key
//! has been asked for more often, lately, than the entry it would evict (TinyLFU, Einziger and
//! Friedman). Without it every miss of a long tail of once-read keys evicts an entry, and the
//! keys that matter are pushed out by keys that never come back: at 10M keys under zipf 0.99
//! with a 1.5% cache the sampled LFU alone held 61% of the requests where the best possible
//! was 69%.
//!
//! The "how often" is a count-min sketch per shard: four 4-bit-saturating counters per key
//! (bytes here, capped at 15), picked from the key's hash, bumped by every lookup, hit or miss,
//! and all halved after every `10 x width` bumps so that old popularity fades. A key's four
//! counters lie in one 64-byte block (one cache line; a "blocked" sketch, as Caffeine's), each
//! in its own quarter of it: a lookup costs one cache miss, not four (four were 3.5% of the
//! server's CPU under GET hits over 100k keys).

/// Counters per byte of a shard's budget: one per 64 bytes, about four per cached entry of a
/// short string (so the four counters of different keys rarely all collide).
const BUDGET_BYTES_PER_COUNTER: usize = 64;
const MIN_WIDTH: usize = 256;
const MAX_COUNT: u8 = 15;
/// Bumps per counter between halvings.
const SAMPLE_FACTOR: usize = 10;
/// Counters per block (one cache line), and per quarter of a block.
const BLOCK: usize = 64;
const QUARTER: usize = BLOCK / 4;

/// Bytes of the sketch of a shard whose share of `cache-maxmemory` is `share` bytes (about
/// 1.6% of it).
pub fn width_for(share: usize) -> usize {
    (share / BUDGET_BYTES_PER_COUNTER)
        .max(MIN_WIDTH)
        .next_power_of_two()
}

/// One cache line of counters.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Block([u8; BLOCK]);

#[derive(Default)]
pub struct Sketch {
    blocks: Vec<Block>,
    bumps: usize,
}

impl Sketch {
    /// Sizes the sketch for a shard whose share of the cache is `share` bytes (counts
    /// restart when that changes its size); returns its width (= bytes).
    pub fn fit(&mut self, share: usize) -> usize {
        let width = width_for(share);
        if self.blocks.len() * BLOCK != width {
            self.blocks = vec![Block([0; BLOCK]); width / BLOCK];
            self.bumps = 0;
        }
        width
    }

    /// The key's block, and its four counters there (one in each quarter). The hash is mixed
    /// first: its low bits chose the shard, so they are the same for every key here. The block
    /// comes from the top bits of the mix, the counters from middle ones, so they vary
    /// independently.
    fn slots(&self, hash: u64) -> (usize, [usize; 4]) {
        let h = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let block = (h >> 40) as usize & (self.blocks.len() - 1);
        let at = [0, 1, 2, 3].map(|i| i * QUARTER + (h >> (16 + 4 * i)) as usize % QUARTER);
        (block, at)
    }

    /// Counts one lookup of the key hashing to `hash`.
    pub fn touch(&mut self, hash: u64) {
        if self.blocks.is_empty() {
            return;
        }
        let (b, at) = self.slots(hash);
        let block = &mut self.blocks[b].0;
        for i in at {
            if block[i] < MAX_COUNT {
                block[i] += 1;
            }
        }
        self.bumps += 1;
        if self.bumps >= SAMPLE_FACTOR * self.blocks.len() * BLOCK {
            for c in self.blocks.iter_mut().flat_map(|b| b.0.iter_mut()) {
                *c >>= 1;
            }
            self.bumps /= 2;
        }
    }

    /// Recent lookups of the key hashing to `hash` (an over-estimate, never an under-).
    pub fn estimate(&self, hash: u64) -> u8 {
        if self.blocks.is_empty() {
            return 0;
        }
        let (b, at) = self.slots(hash);
        let block = &self.blocks[b].0;
        at.into_iter().map(|i| block[i]).min().unwrap_or(0)
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
    fn counts_fade() {
        let mut s = Sketch::default();
        let width = s.fit(0);
        for _ in 0..15 {
            s.touch(h(1));
        }
        assert_eq!(s.estimate(h(1)), 15);
        for k in 0..(SAMPLE_FACTOR * width) as u64 {
            s.touch(h(10_000 + k));
        }
        assert!(s.estimate(h(1)) <= 8, "{}", s.estimate(h(1)));
    }
}
