//! Backing off run-to-completion tries that keep falling back to the pool.
//!
//! A run-to-completion write (or a hot-cache miss tried against RocksDB's memory) that would
//! wait is abandoned and run again by a worker. When that is the common case, for example SETs
//! spread over 10M keys whose prior state is rarely in memory, the I/O thread's try is pure
//! waste: a profile of that load found the I/O threads spending 15% of the server's CPU on
//! RocksDB lookups that the workers then repeated. So each I/O thread keeps, per command, the
//! outcome of its recent tries, and while most of a window of them fell back it stops trying
//! for a while (doubling the pause after each bad window, up to [`MAX_PAUSE`] commands), then
//! tries a window again: a workload that turns friendly is noticed within one pause.
//!
//! Thread-local (an I/O thread's own counters; nothing shared, no atomics on the path), and
//! switchable: `rtc-backoff no` tries every time, as before.

use std::cell::RefCell;

/// Tries per verdict.
const WINDOW: u16 = 64;
/// First pause (commands not tried) after a window in which most tries fell back.
const FIRST_PAUSE: u32 = 256;
/// Longest pause: at most one window of tries per this many commands.
const MAX_PAUSE: u32 = 16_384;

/// One command's recent tries on this I/O thread.
#[derive(Clone, Copy, Default)]
struct Gate {
    tries: u16,
    fallbacks: u16,
    /// Commands left to send straight to the pool.
    paused: u32,
    /// The pause the next bad window gets.
    next_pause: u32,
}

impl Gate {
    fn should_try(&mut self) -> bool {
        if self.paused == 0 {
            return true;
        }
        self.paused -= 1;
        false
    }

    fn record(&mut self, fell_back: bool) {
        self.tries += 1;
        self.fallbacks += u16::from(fell_back);
        if self.tries < WINDOW {
            return;
        }
        if self.fallbacks * 2 > self.tries {
            let pause = self.next_pause.max(FIRST_PAUSE);
            self.paused = pause;
            self.next_pause = (pause * 2).min(MAX_PAUSE);
        } else {
            self.next_pause = 0;
        }
        self.tries = 0;
        self.fallbacks = 0;
    }
}

thread_local! {
    /// Indexed by command table id.
    static GATES: RefCell<Vec<Gate>> = const { RefCell::new(Vec::new()) };
}

fn with_gate<T>(id: usize, f: impl FnOnce(&mut Gate) -> T) -> T {
    GATES.with(|g| {
        let mut gates = g.borrow_mut();
        if gates.len() <= id {
            gates.resize(id + 1, Gate::default());
        }
        f(&mut gates[id])
    })
}

/// Whether this I/O thread should try command `id` here now (false: hand it to the pool).
pub fn should_try(id: usize) -> bool {
    with_gate(id, Gate::should_try)
}

/// The outcome of a try of command `id`: it completed here, or fell back to the pool.
pub fn record(id: usize, fell_back: bool) {
    with_gate(id, |g| g.record(fell_back));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(g: &mut Gate, n: usize, fell_back: bool) -> usize {
        let mut tried = 0;
        for _ in 0..n {
            if g.should_try() {
                tried += 1;
                g.record(fell_back);
            }
        }
        tried
    }

    #[test]
    fn succeeding_tries_are_never_paused() {
        let mut g = Gate::default();
        assert_eq!(run(&mut g, 10_000, false), 10_000);
    }

    #[test]
    fn failing_tries_back_off_to_a_bounded_share() {
        let mut g = Gate::default();
        let tried = run(&mut g, 1_000_000, true);
        // Windows of 64 tries between pauses doubling to 16,384: well under 1% tried.
        assert!(tried >= WINDOW as usize, "tried {tried}");
        assert!(tried < 10_000, "tried {tried}");
    }

    #[test]
    fn a_workload_that_turns_friendly_is_tried_again() {
        let mut g = Gate::default();
        run(&mut g, 1_000_000, true);
        // Within one longest pause plus a window, tries resume and then never stop.
        run(&mut g, (MAX_PAUSE + WINDOW as u32) as usize, false);
        assert_eq!(g.paused, 0);
        assert_eq!(run(&mut g, 5_000, false), 5_000);
    }

    #[test]
    fn a_minority_of_fallbacks_does_not_pause() {
        let mut g = Gate::default();
        let mut tried = 0;
        for i in 0..10_000 {
            if g.should_try() {
                tried += 1;
                g.record(i % 3 == 0);
            }
        }
        assert_eq!(tried, 10_000);
    }
}
