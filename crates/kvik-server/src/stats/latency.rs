//! Latency: the latency monitor (LATENCY LATEST / HISTORY / RESET / DOCTOR / GRAPH, events at
//! or above `latency-monitor-threshold` milliseconds) and per-command latency histograms
//! (LATENCY HISTOGRAM, INFO latencystats, while `latency-tracking` is on).
//!
//! The two settings are mirrored here as atomics ([`Latency::configure`], at start and after
//! every CONFIG SET), so recording a command costs two loads when both are off and one atomic
//! add on the command's own histogram when tracking is on, in the recording thread's own copy
//! of its buckets (`stats::sharded`: both I/O threads adding to one bucket bounced its line).
//!
//! Histograms have two buckets per power of two of microseconds (so a percentile is known to
//! within 50%), allocated on a command's first call.

use super::sharded::{self, SLOTS};
use parking_lot::Mutex;
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Duration;

/// Samples an event keeps (Redis's LATENCY_TS_LEN).
const HISTORY_LEN: usize = 160;
/// Buckets: two per power of two, up to 2^40 µs.
const BUCKETS: usize = 82;

/// One event's samples: (unix secs, ms), at most one per second (the largest), oldest first.
#[derive(Default, Debug)]
struct Event {
    samples: VecDeque<(u64, u64)>,
    max: u64,
}

/// One thread slot's buckets, on lines of their own.
#[repr(align(64))]
struct Buckets([AtomicU64; BUCKETS]);

/// A command's latency histogram: buckets per thread slot (`stats::sharded`), summed to read.
pub struct Histogram {
    slots: [Buckets; SLOTS],
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Histogram({})", self.count())
    }
}

/// The bucket of a duration of `us` microseconds: 2 log2(us) plus its next bit.
fn bucket(us: u64) -> usize {
    let us = us.max(1);
    let log = 63 - us.leading_zeros() as usize;
    let half = if log == 0 {
        0
    } else {
        (us >> (log - 1)) as usize & 1
    };
    (2 * log + half).min(BUCKETS - 1)
}

/// The largest duration bucket `i` holds, in µs (what a percentile in it is reported as).
fn bucket_top(i: usize) -> u64 {
    let (log, half) = (i / 2, i % 2);
    if log == 0 {
        1
    } else if half == 0 {
        (1u64 << log) + (1u64 << (log - 1)) - 1
    } else {
        (1u64 << (log + 1)) - 1
    }
}

impl Histogram {
    fn new() -> Histogram {
        Histogram {
            slots: std::array::from_fn(|_| Buckets(std::array::from_fn(|_| AtomicU64::new(0)))),
        }
    }

    pub fn record(&self, us: u64) {
        self.slots[sharded::slot()].0[bucket(us)].fetch_add(1, Relaxed);
    }

    /// Calls per bucket, summed over the slots.
    fn counts(&self) -> [u64; BUCKETS] {
        let mut counts = [0; BUCKETS];
        for slot in &self.slots {
            for (c, b) in counts.iter_mut().zip(&slot.0) {
                *c += b.load(Relaxed);
            }
        }
        counts
    }

    pub fn count(&self) -> u64 {
        self.counts().iter().sum()
    }

    /// The `p`th percentile (0-100), in µs: the top of the bucket it falls in.
    pub fn percentile(&self, p: f64) -> u64 {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_top(i);
            }
        }
        0
    }

    /// `(bound, calls under bound µs)` for bound = 2, 4, 8 ... up to the first bound that
    /// covers every call (LATENCY HISTOGRAM's cumulative `histogram_usec`).
    pub fn cumulative(&self) -> Vec<(u64, u64)> {
        let counts = self.counts();
        let total: u64 = counts.iter().sum();
        let mut out = Vec::new();
        let mut seen = 0;
        for log in 0..BUCKETS / 2 {
            seen += counts[2 * log] + counts[2 * log + 1];
            out.push((1u64 << (log + 1), seen));
            if seen >= total {
                break;
            }
        }
        out
    }

    fn reset(&self) {
        for b in self.slots.iter().flat_map(|s| &s.0) {
            b.store(0, Relaxed);
        }
    }
}

#[derive(Debug)]
pub struct Latency {
    threshold_ms: AtomicU64,
    tracking: AtomicBool,
    events: Mutex<BTreeMap<&'static str, Event>>,
    /// Per command table id.
    histograms: Box<[OnceLock<Histogram>]>,
}

impl Latency {
    /// Histograms for `commands` command table entries.
    pub fn new(commands: usize) -> Latency {
        Latency {
            threshold_ms: AtomicU64::new(0),
            tracking: AtomicBool::new(true),
            events: Mutex::new(BTreeMap::new()),
            histograms: (0..commands).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Takes `latency-monitor-threshold` (ms, 0: off) and `latency-tracking`.
    pub fn configure(&self, threshold_ms: u64, tracking: bool) {
        self.threshold_ms.store(threshold_ms, Relaxed);
        self.tracking.store(tracking, Relaxed);
    }

    /// A command ran for `elapsed` (`fast`: a FAST command, event `fast-command`, else
    /// `command`).
    pub fn record_command(&self, id: usize, elapsed: Duration, fast: bool) {
        if self.tracking.load(Relaxed) {
            if let Some(slot) = self.histograms.get(id) {
                slot.get_or_init(Histogram::new)
                    .record(elapsed.as_micros() as u64);
            }
        }
        let event = if fast { "fast-command" } else { "command" };
        self.record_event(event, elapsed);
    }

    /// Notes `event` if it lasted at least the threshold.
    pub fn record_event(&self, event: &'static str, elapsed: Duration) {
        let threshold = self.threshold_ms.load(Relaxed);
        let ms = elapsed.as_millis() as u64;
        if threshold == 0 || ms < threshold {
            return;
        }
        let now = crate::clock::unix_ms() / 1000;
        let mut events = self.events.lock();
        let e = events.entry(event).or_default();
        match e.samples.back_mut() {
            Some((t, v)) if *t == now => *v = (*v).max(ms),
            _ => {
                e.samples.push_back((now, ms));
                if e.samples.len() > HISTORY_LEN {
                    e.samples.pop_front();
                }
            }
        }
        e.max = e.max.max(ms);
    }

    /// LATENCY LATEST: (event, time of its last sample, last ms, largest ms ever).
    pub fn latest(&self) -> Vec<(&'static str, u64, u64, u64)> {
        self.events
            .lock()
            .iter()
            .filter_map(|(name, e)| {
                let (t, v) = *e.samples.back()?;
                Some((*name, t, v, e.max))
            })
            .collect()
    }

    /// LATENCY HISTORY event: its samples, oldest first (none for an unknown event).
    pub fn history(&self, event: &[u8]) -> Vec<(u64, u64)> {
        self.events
            .lock()
            .iter()
            .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(event))
            .map(|(_, e)| e.samples.iter().copied().collect())
            .unwrap_or_default()
    }

    /// LATENCY RESET [event ...]: forgets those events (all without names); how many it did.
    pub fn reset(&self, events: &[&[u8]]) -> usize {
        let mut map = self.events.lock();
        if events.is_empty() {
            let n = map.len();
            map.clear();
            return n;
        }
        let before = map.len();
        map.retain(|name, _| {
            !events
                .iter()
                .any(|e| name.as_bytes().eq_ignore_ascii_case(e))
        });
        before - map.len()
    }

    /// The histogram of command `id`, if it ran since start (or the last reset).
    pub fn histogram(&self, id: usize) -> Option<&Histogram> {
        self.histograms.get(id)?.get().filter(|h| h.count() > 0)
    }

    /// CONFIG RESETSTAT: the histograms start over.
    pub fn reset_histograms(&self) {
        for h in self.histograms.iter().filter_map(OnceLock::get) {
            h.reset();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_and_percentiles() {
        for us in [1, 2, 3, 5, 100, 1000, 1 << 20] {
            let b = bucket(us);
            assert!(bucket_top(b) >= us, "{us}");
            assert!(b == 0 || bucket_top(b - 1) < us, "{us}");
        }
        let h = Histogram::new();
        for us in 1..=100 {
            h.record(us);
        }
        assert_eq!(h.count(), 100);
        let p50 = h.percentile(50.0);
        assert!((50..=75).contains(&p50), "{p50}");
        assert!(h.percentile(100.0) >= 100);
        let cum = h.cumulative();
        assert_eq!(cum.last().unwrap().1, 100);
        assert_eq!(cum[0], (2, 1));
    }

    #[test]
    fn events_keep_one_sample_per_second_and_reset() {
        let l = Latency::new(1);
        l.record_event("command", Duration::from_millis(50));
        assert!(l.latest().is_empty(), "threshold 0 is off");
        l.configure(10, true);
        l.record_event("command", Duration::from_millis(5));
        l.record_event("command", Duration::from_millis(50));
        l.record_event("command", Duration::from_millis(70));
        let latest = l.latest();
        assert_eq!(latest.len(), 1);
        assert_eq!((latest[0].0, latest[0].3), ("command", 70));
        assert!(!l.history(b"COMMAND").is_empty());
        assert_eq!(l.reset(&[b"nothing"]), 0);
        assert_eq!(l.reset(&[]), 1);
        assert!(l.latest().is_empty());
    }
}
