//! One memory budget (`maxmemory`) split between the hot cache and RocksDB.
//!
//! Role: turns the two settings (`maxmemory`, `cache-maxmemory`) into the sizes of everything
//! that grows with use: the hot cache, the block cache and, charged to it, the memtables; a
//! fixed share is left for what RocksDB keeps outside the block cache (table readers, file
//! metadata, iterators' and compactions' blocks). Data on disk adds nothing beyond these.
//!
//! - `maxmemory 0` (the default) means a quarter of the machine's memory (or of the cgroup's
//!   limit, if lower), at least [`MIN_BUDGET`]. Unlike Redis, kvik never evicts data or refuses
//!   writes for it: every key stays on disk, the budget only bounds what is cached.
//! - `cache-maxmemory 0` (the default) gives the hot cache half of what the reserve leaves;
//!   a value set explicitly is taken as is, and the block cache gets the rest (never less than
//!   [`MIN_BLOCK_CACHE`], even if that overshoots the budget: index and filter partitions must
//!   fit somewhere).
//! - The memtables may take a quarter of the block cache ([`Split::write_buffers`]).
//!
//! A pure function of its inputs, so the split is unit-tested without a server.

/// Smallest budget `maxmemory 0` derives.
pub const MIN_BUDGET: u64 = 256 << 20;
/// Smallest block cache, whatever the hot cache takes.
pub const MIN_BLOCK_CACHE: u64 = 8 << 20;
/// Share of the budget reserved for RocksDB memory outside the block cache: 1/RESERVE_DIVISOR,
/// at least MIN_RESERVE.
const RESERVE_DIVISOR: u64 = 16;
const MIN_RESERVE: u64 = 4 << 20;

/// Where the budget goes, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// The budget itself (`maxmemory`, or the derived default).
    pub total: u64,
    /// Whether `total` was derived (`maxmemory 0`).
    pub auto: bool,
    pub hot_cache: u64,
    /// Block cache capacity; the memtables are charged to it.
    pub block_cache: u64,
    /// Limit of all memtables together (a part of `block_cache`).
    pub write_buffers: u64,
    /// Left for table readers and RocksDB's other memory outside the block cache.
    pub reserve: u64,
}

impl Split {
    /// Splits `maxmemory` (0: derived from `system_memory`) given `cache-maxmemory` (0: a share).
    pub fn new(maxmemory: u64, cache_maxmemory: u64, system_memory: u64) -> Split {
        let auto = maxmemory == 0;
        let total = if auto {
            (system_memory / 4).max(MIN_BUDGET)
        } else {
            maxmemory
        };
        let reserve = (total / RESERVE_DIVISOR).max(MIN_RESERVE).min(total / 2);
        let rest = total - reserve;
        let hot_cache = if cache_maxmemory == 0 {
            rest / 2
        } else {
            cache_maxmemory
        };
        let block_cache = rest.saturating_sub(hot_cache).max(MIN_BLOCK_CACHE);
        Split {
            total,
            auto,
            hot_cache,
            block_cache,
            write_buffers: block_cache / 4,
            reserve,
        }
    }

    /// The budget as the server sees it: physical memory (or the cgroup limit) for `maxmemory 0`.
    pub fn for_machine(maxmemory: u64, cache_maxmemory: u64) -> Split {
        Split::new(maxmemory, cache_maxmemory, machine_memory())
    }

    /// Bytes the split gives out, beyond the budget when an explicit `cache-maxmemory` leaves
    /// too little for the block cache.
    pub fn committed(&self) -> u64 {
        self.hot_cache + self.block_cache + self.reserve
    }
}

/// Physical memory, or the cgroup (v2, then v1) memory limit if that is lower; 0 if unknown.
pub fn machine_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = if pages > 0 && page > 0 {
        pages as u64 * page as u64
    } else {
        0
    };
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|p| std::fs::read_to_string(p).ok())
    .filter_map(|s| s.trim().parse::<u64>().ok())
    .min();
    match cgroup {
        Some(limit) if limit > 0 && (physical == 0 || limit < physical) => limit,
        _ => physical,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn a_set_budget_is_split_and_adds_up() {
        let s = Split::new(128 * MB, 0, 0);
        assert!(!s.auto);
        assert_eq!(s.reserve, 8 * MB);
        assert_eq!(s.hot_cache, 60 * MB);
        assert_eq!(s.block_cache, 60 * MB);
        assert_eq!(s.write_buffers, 15 * MB);
        assert_eq!(s.committed(), s.total);
    }

    #[test]
    fn an_explicit_cache_maxmemory_is_kept_and_the_block_cache_gets_the_rest() {
        let s = Split::new(128 * MB, 100 * MB, 0);
        assert_eq!(s.hot_cache, 100 * MB);
        assert_eq!(s.block_cache, 20 * MB);
        // Too big a hot cache still leaves the block cache its floor.
        let s = Split::new(64 * MB, 256 * MB, 0);
        assert_eq!(s.block_cache, MIN_BLOCK_CACHE);
        assert!(s.committed() > s.total);
    }

    #[test]
    fn maxmemory_zero_takes_a_quarter_of_the_machine_with_a_floor() {
        let s = Split::new(0, 0, 16 << 30);
        assert!(s.auto);
        assert_eq!(s.total, 4 << 30);
        assert_eq!(Split::new(0, 0, 512 * MB).total, MIN_BUDGET);
        assert_eq!(Split::new(0, 0, 0).total, MIN_BUDGET);
    }

    #[test]
    fn tiny_budgets_stay_sane() {
        let s = Split::new(4 * MB, 0, 0);
        assert_eq!(s.reserve, 2 * MB);
        assert_eq!(s.block_cache, MIN_BLOCK_CACHE);
        assert!(s.write_buffers > 0);
    }
}
