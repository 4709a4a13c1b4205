//! [`Ring`]: a weighted consistent-hash ring in the style of ketama.
//!
//! Each server gets `POINTS_PER_WEIGHT * weight` points on a 32-bit circle, each point the hash
//! of `"<name>-<i>"`; a key belongs to the first point at or after its own hash (wrapping).
//! Adding or removing a server therefore moves only the keys whose nearest point changes, about
//! `1/n` of them, and a server of weight 2 owns about twice the keys of one of weight 1.
//!
//! The hash is 64-bit FNV-1a followed by the MurmurHash3 `fmix64` finaliser (FNV alone mixes
//! short keys poorly); the ring uses its upper 32 bits. It is deterministic across processes
//! and versions of this crate, so every client maps keys alike.

/// Points per unit of weight (ketama uses 160 per server at equal weights).
pub const POINTS_PER_WEIGHT: u32 = 160;

/// The ring's key hash: FNV-1a 64 then `fmix64`, upper 32 bits.
pub fn ring_hash(data: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h >> 32) as u32
}

/// A weighted consistent-hash ring over server indexes.
#[derive(Clone, Debug)]
pub struct Ring {
    /// (point, server index), sorted by point.
    points: Vec<(u32, u32)>,
    servers: usize,
}

impl Ring {
    /// Builds a ring from `(name, weight)` pairs; the index of a pair is its server number.
    /// Names must be unique (usually "host:port"); a weight of 0 gives a server no keys.
    pub fn new<S: AsRef<str>>(servers: &[(S, u32)]) -> Ring {
        let mut points = Vec::new();
        for (idx, (name, weight)) in servers.iter().enumerate() {
            for i in 0..POINTS_PER_WEIGHT * weight {
                let label = format!("{}-{i}", name.as_ref());
                points.push((ring_hash(label.as_bytes()), idx as u32));
            }
        }
        points.sort_unstable();
        Ring {
            points,
            servers: servers.len(),
        }
    }

    /// Number of servers the ring was built with.
    pub fn len(&self) -> usize {
        self.servers
    }

    /// True when no server has a point.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The server owning `key`, or `None` for an empty ring.
    pub fn server_for(&self, key: &[u8]) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let h = ring_hash(key);
        let i = self.points.partition_point(|p| p.0 < h);
        let p = if i == self.points.len() { 0 } else { i };
        Some(self.points[p].1 as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<(String, u32)> {
        (0..n).map(|i| (format!("10.0.0.{i}:6379"), 1)).collect()
    }

    #[test]
    fn spreads_evenly_and_honours_weights() {
        let ring = Ring::new(&names(4));
        let mut counts = [0usize; 4];
        for k in 0..40_000 {
            counts[ring.server_for(format!("key:{k}").as_bytes()).unwrap()] += 1;
        }
        for c in counts {
            assert!((7_000..13_000).contains(&c), "uneven: {counts:?}");
        }
        let weighted = Ring::new(&[("a:1", 1), ("b:1", 3)]);
        let mut w = [0usize; 2];
        for k in 0..40_000 {
            w[weighted.server_for(format!("key:{k}").as_bytes()).unwrap()] += 1;
        }
        let ratio = w[1] as f64 / w[0] as f64;
        assert!((2.2..3.9).contains(&ratio), "weight 3 vs 1 gave {w:?}");
        assert_eq!(Ring::new::<&str>(&[]).server_for(b"k"), None);
    }

    #[test]
    fn adding_a_server_moves_about_one_fifth() {
        let four = Ring::new(&names(4));
        let five = Ring::new(&names(5));
        let mut moved = 0;
        for k in 0..20_000 {
            let key = format!("key:{k}");
            let a = four.server_for(key.as_bytes()).unwrap();
            let b = five.server_for(key.as_bytes()).unwrap();
            if a != b {
                assert_eq!(b, 4, "a key moved between old servers");
                moved += 1;
            }
        }
        assert!((2_000..6_000).contains(&moved), "moved {moved} of 20000");
    }
}
