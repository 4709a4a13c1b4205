//! `io-threads` and `workers`: a number, or `auto` (the default), which sizes both from the
//! machine's cores at start.
//!
//! Why from the cores: every thread kvik adds competes for the same CPUs. I/O threads do the
//! run-to-completion work (cache hits, blind writes, replies), workers the commands that may
//! wait on RocksDB; on a small machine more runnable threads than cores only add preemption
//! (an I/O thread preempted mid-turn stalls every connection it owns), while on a big one a
//! fixed small count leaves cores idle. The split below is what measured best on 2 cores
//! (docs/benchmarks.md, "Thread defaults") and grows with the cores beyond.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Stored for `auto`.
const AUTO: u64 = 0;

/// The counts `auto` stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Auto {
    pub io_threads: usize,
    pub workers: usize,
}

impl Auto {
    /// For a machine with `cores` CPUs.
    pub fn for_cores(cores: usize) -> Auto {
        let cores = cores.max(1);
        Auto {
            io_threads: cores.clamp(1, 16),
            workers: (2 * cores).clamp(2, 64),
        }
    }

    /// For this machine (the CPUs this process may run on).
    pub fn for_this_machine() -> Auto {
        Auto::for_cores(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

/// Parses `auto` or a count in `1..=max`.
pub fn set(a: &AtomicU64, v: &str, max: u64) -> Result<(), String> {
    if v.eq_ignore_ascii_case("auto") {
        a.store(AUTO, Relaxed);
        return Ok(());
    }
    match v.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => {
            a.store(n, Relaxed);
            Ok(())
        }
        _ => Err(format!(
            "argument must be 'auto' or between 1 and {max} inclusive"
        )),
    }
}

/// What CONFIG GET shows: `auto` as given (INFO shows the counts it became).
pub fn show(a: &AtomicU64) -> String {
    match a.load(Relaxed) {
        AUTO => "auto".into(),
        n => n.to_string(),
    }
}

/// The count to start: the setting, or `auto_count` when it is `auto`.
pub fn resolve(a: &AtomicU64, auto_count: usize) -> usize {
    match a.load(Relaxed) {
        AUTO => auto_count,
        n => n as usize,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_grows_with_the_cores_within_bounds() {
        assert_eq!(Auto::for_cores(0), Auto::for_cores(1));
        let small = Auto::for_cores(1);
        assert!(small.io_threads >= 1 && small.workers >= 1);
        let mut last = small;
        for cores in 2..=256 {
            let a = Auto::for_cores(cores);
            assert!(a.io_threads >= last.io_threads && a.workers >= last.workers);
            assert!(a.io_threads <= 16 && a.workers <= 64, "{cores}: {a:?}");
            last = a;
        }
    }

    #[test]
    fn settings_take_auto_or_a_bounded_count() {
        let a = AtomicU64::new(7);
        set(&a, "AUTO", 128).unwrap();
        assert_eq!(show(&a), "auto");
        assert_eq!(resolve(&a, 3), 3);
        set(&a, "5", 128).unwrap();
        assert_eq!((show(&a), resolve(&a, 3)), ("5".to_string(), 5));
        for bad in ["0", "129", "-1", "two", ""] {
            assert!(set(&a, bad, 128).is_err(), "{bad}");
        }
        assert_eq!(resolve(&a, 3), 5, "a refused value changes nothing");
    }
}
