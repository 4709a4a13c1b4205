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

/// When a run of tries pauses: every `window` tries, if more than `bad_allowed` of them went
/// badly, the next `first_pause` chances are not tried, doubling after each bad window up to
/// `max_pause`; a good window resets the pause.
#[derive(Clone, Copy, Debug)]
pub(super) struct Policy {
    pub window: u16,
    pub bad_allowed: u16,
    pub first_pause: u32,
    pub max_pause: u32,
}

/// Run-to-completion tries of a command: a window of 64, paused while most fell back, for 256
/// commands at first and at most one window per 16,384.
const FALLBACKS: Policy = Policy {
    window: 64,
    bad_allowed: 32,
    first_pause: 256,
    max_pause: 16_384,
};

/// The recent tries of one thing under a [`Policy`].
#[derive(Clone, Copy, Default)]
pub(super) struct Backoff {
    tries: u16,
    bad: u16,
    /// Chances left to pass up.
    paused: u32,
    /// The pause the next bad window gets.
    next_pause: u32,
}

impl Backoff {
    pub const NEW: Backoff = Backoff {
        tries: 0,
        bad: 0,
        paused: 0,
        next_pause: 0,
    };

    /// Whether to try now (false: a chance passed up while paused).
    pub fn should_try(&mut self) -> bool {
        if self.paused == 0 {
            return true;
        }
        self.paused -= 1;
        false
    }

    /// The outcome of a try; returns whether it ended a bad window (a pause begins).
    pub fn record(&mut self, policy: &Policy, bad: bool) -> bool {
        self.tries += 1;
        self.bad += u16::from(bad);
        if self.tries < policy.window {
            return false;
        }
        let pause = self.bad > policy.bad_allowed;
        if pause {
            let length = self.next_pause.max(policy.first_pause);
            self.paused = length;
            self.next_pause = (length * 2).min(policy.max_pause);
        } else {
            self.next_pause = 0;
        }
        self.tries = 0;
        self.bad = 0;
        pause
    }

    #[cfg(test)]
    pub fn paused(&self) -> u32 {
        self.paused
    }
}

thread_local! {
    /// Indexed by command table id.
    static GATES: RefCell<Vec<Backoff>> = const { RefCell::new(Vec::new()) };
}

fn with_gate<T>(id: usize, f: impl FnOnce(&mut Backoff) -> T) -> T {
    GATES.with(|g| {
        let mut gates = g.borrow_mut();
        if gates.len() <= id {
            gates.resize(id + 1, Backoff::NEW);
        }
        f(&mut gates[id])
    })
}

/// Whether this I/O thread should try command `id` here now (false: hand it to the pool).
pub fn should_try(id: usize) -> bool {
    with_gate(id, Backoff::should_try)
}

/// The outcome of a try of command `id`: it completed here, or fell back to the pool.
pub fn record(id: usize, fell_back: bool) {
    with_gate(id, |g| g.record(&FALLBACKS, fell_back));
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: u16 = FALLBACKS.window;
    const MAX_PAUSE: u32 = FALLBACKS.max_pause;

    fn run(g: &mut Backoff, n: usize, fell_back: bool) -> usize {
        let mut tried = 0;
        for _ in 0..n {
            if g.should_try() {
                tried += 1;
                g.record(&FALLBACKS, fell_back);
            }
        }
        tried
    }

    #[test]
    fn succeeding_tries_are_never_paused() {
        let mut g = Backoff::NEW;
        assert_eq!(run(&mut g, 10_000, false), 10_000);
    }

    #[test]
    fn failing_tries_back_off_to_a_bounded_share() {
        let mut g = Backoff::NEW;
        let tried = run(&mut g, 1_000_000, true);
        // Windows of 64 tries between pauses doubling to 16,384: well under 1% tried.
        assert!(tried >= WINDOW as usize, "tried {tried}");
        assert!(tried < 10_000, "tried {tried}");
    }

    #[test]
    fn a_workload_that_turns_friendly_is_tried_again() {
        let mut g = Backoff::NEW;
        run(&mut g, 1_000_000, true);
        // Within one longest pause plus a window, tries resume and then never stop.
        run(&mut g, (MAX_PAUSE + WINDOW as u32) as usize, false);
        assert_eq!(g.paused(), 0);
        assert_eq!(run(&mut g, 5_000, false), 5_000);
    }

    #[test]
    fn a_minority_of_fallbacks_does_not_pause() {
        let mut g = Backoff::NEW;
        let mut tried = 0;
        for i in 0..10_000 {
            if g.should_try() {
                tried += 1;
                g.record(&FALLBACKS, i % 3 == 0);
            }
        }
        assert_eq!(tried, 10_000);
    }
}
