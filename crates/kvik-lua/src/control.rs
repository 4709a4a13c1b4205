//! [`ScriptControl`]: what other threads of the server see of a running script, and how they
//! stop it.
//!
//! Redis runs scripts on its only thread and, past `busy-reply-threshold`, serves other clients
//! from inside the script's interrupt hook: BUSY to most, SCRIPT KILL / FUNCTION KILL honoured.
//! kvik's other threads keep running, so the hook only publishes state here (running, busy,
//! written) and polls the kill flag; the server answers BUSY and SCRIPT KILL from it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::errors;

/// Shared state of the script running on one runtime (zero or one at a time).
#[derive(Debug)]
pub struct ScriptControl {
    running: AtomicBool,
    is_eval: AtomicBool,
    busy: AtomicBool,
    kill: AtomicBool,
    written: AtomicBool,
    threshold_ms: AtomicU64,
    /// Microseconds after which the running script is aborted (0: never), see
    /// [`ScriptControl::set_abort_after`].
    abort_after_us: AtomicU64,
    /// The run was aborted ([`ScriptControl::abort`] or its time budget), not killed.
    aborted: AtomicBool,
    started: Mutex<Option<Instant>>,
    /// Counts the busy scripts of every control sharing it: the server checks one atomic
    /// before each command instead of every runtime's state.
    busy_counter: Option<Arc<AtomicUsize>>,
}

impl Default for ScriptControl {
    fn default() -> Self {
        ScriptControl::new(Duration::from_millis(5000))
    }
}

impl ScriptControl {
    /// A control for scripts that turn busy after `busy_threshold` (Redis's
    /// `busy-reply-threshold`, default 5 s).
    pub fn new(busy_threshold: Duration) -> ScriptControl {
        ScriptControl {
            running: AtomicBool::new(false),
            is_eval: AtomicBool::new(true),
            busy: AtomicBool::new(false),
            kill: AtomicBool::new(false),
            written: AtomicBool::new(false),
            threshold_ms: AtomicU64::new(busy_threshold.as_millis() as u64),
            abort_after_us: AtomicU64::new(0),
            aborted: AtomicBool::new(false),
            started: Mutex::new(None),
            busy_counter: None,
        }
    }

    /// Like [`ScriptControl::new`], and `counter` is incremented while this control's script
    /// is busy (one counter shared by all the runtimes of a server).
    pub fn counting_busy(busy_threshold: Duration, counter: Arc<AtomicUsize>) -> ScriptControl {
        ScriptControl {
            busy_counter: Some(counter),
            ..ScriptControl::new(busy_threshold)
        }
    }

    /// Clears the busy state, keeping the shared counter right.
    fn clear_busy(&self) {
        if self.busy.swap(false, Ordering::AcqRel) {
            if let Some(c) = &self.busy_counter {
                c.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Changes the busy threshold (CONFIG SET busy-reply-threshold / lua-time-limit).
    pub fn set_busy_threshold(&self, t: Duration) {
        self.threshold_ms
            .store(t.as_millis() as u64, Ordering::Relaxed);
    }

    /// Gives the next runs a time budget (`None`: none): past it the script is aborted, as if
    /// killed but without Redis's checks, and [`ScriptControl::take_aborted`] says so. For a
    /// server that tries a script where it must not run long (an event loop) and runs it again
    /// elsewhere if it does; checked at the interrupt hook, so within about 100,000 VM
    /// instructions of the budget.
    pub fn set_abort_after(&self, budget: Option<Duration>) {
        let us = budget.map_or(0, |b| (b.as_micros() as u64).max(1));
        self.abort_after_us.store(us, Ordering::Relaxed);
    }

    /// Stops the running script at once, whatever it did (the host found it cannot go on
    /// here): its next `redis.call` or interrupt check raises, and `pcall` cannot catch it.
    /// The caller discards what the run wrote.
    pub fn abort(&self) {
        self.aborted.store(true, Ordering::Release);
        self.kill.store(true, Ordering::Release);
    }

    /// Whether the last run was aborted (and clears it).
    pub fn take_aborted(&self) -> bool {
        self.aborted.swap(false, Ordering::AcqRel)
    }

    /// Whether a script is running.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Whether the running script has passed the busy threshold: other clients get
    /// [`ScriptControl::busy_error`].
    pub fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Whether the running script has run a write command.
    pub fn has_written(&self) -> bool {
        self.written.load(Ordering::Acquire)
    }

    /// How long the running script has run so far (zero when none runs).
    pub fn elapsed(&self) -> Duration {
        self.started
            .lock()
            .expect("not poisoned")
            .map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// The BUSY error for the kind of script running.
    pub fn busy_error(&self) -> &'static str {
        if self.is_eval.load(Ordering::Relaxed) {
            errors::BUSY_EVAL
        } else {
            errors::BUSY_FUNCTION
        }
    }

    /// SCRIPT KILL (`from_script_kill`) or FUNCTION KILL: Redis's checks in Redis's order.
    /// `Ok` means the script will stop at its next interrupt check.
    pub fn kill(&self, from_script_kill: bool) -> Result<(), &'static str> {
        if !self.is_running() {
            return Err(errors::NOTBUSY);
        }
        if self.has_written() {
            return Err(errors::UNKILLABLE);
        }
        let is_eval = self.is_eval.load(Ordering::Relaxed);
        if from_script_kill && !is_eval {
            return Err(errors::BUSY_FUNCTION);
        }
        if !from_script_kill && is_eval {
            return Err(errors::BUSY_EVAL);
        }
        self.kill.store(true, Ordering::Release);
        Ok(())
    }

    pub(crate) fn begin(&self, is_eval: bool) {
        *self.started.lock().expect("not poisoned") = Some(Instant::now());
        self.is_eval.store(is_eval, Ordering::Relaxed);
        self.kill.store(false, Ordering::Relaxed);
        self.aborted.store(false, Ordering::Relaxed);
        self.written.store(false, Ordering::Relaxed);
        self.clear_busy();
        self.running.store(true, Ordering::Release);
    }

    pub(crate) fn end(&self) {
        self.running.store(false, Ordering::Release);
        self.clear_busy();
        self.kill.store(false, Ordering::Release);
        *self.started.lock().expect("not poisoned") = None;
    }

    pub(crate) fn mark_written(&self) {
        self.written.store(true, Ordering::Release);
    }

    pub(crate) fn killed(&self) -> bool {
        self.kill.load(Ordering::Acquire)
    }

    /// The interrupt hook's check: publishes "busy" once the threshold is passed and tells
    /// whether the script must stop.
    pub(crate) fn tick(&self) -> bool {
        let budget = self.abort_after_us.load(Ordering::Relaxed);
        if budget != 0 && self.elapsed() >= Duration::from_micros(budget) {
            self.abort();
        }
        if !self.busy.load(Ordering::Relaxed) {
            let limit = Duration::from_millis(self.threshold_ms.load(Ordering::Relaxed));
            if self.elapsed() >= limit && !self.busy.swap(true, Ordering::AcqRel) {
                if let Some(c) = &self.busy_counter {
                    c.fetch_add(1, Ordering::AcqRel);
                }
            }
        }
        self.killed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_follows_redis_order() {
        let c = ScriptControl::new(Duration::from_millis(0));
        assert_eq!(c.kill(true), Err(errors::NOTBUSY));
        c.begin(true);
        assert!(!c.tick());
        assert!(c.is_busy());
        assert_eq!(c.kill(false), Err(errors::BUSY_EVAL));
        assert_eq!(c.kill(true), Ok(()));
        assert!(c.tick());
        c.end();
        c.begin(false);
        assert_eq!(c.busy_error(), errors::BUSY_FUNCTION);
        assert_eq!(c.kill(true), Err(errors::BUSY_FUNCTION));
        c.mark_written();
        assert_eq!(c.kill(false), Err(errors::UNKILLABLE));
        c.end();
        assert!(!c.is_running());
    }

    #[test]
    fn an_abort_stops_the_script_and_is_told_apart_from_a_kill() {
        let c = ScriptControl::new(Duration::from_secs(5));
        c.begin(true);
        c.mark_written();
        c.abort();
        assert!(
            c.tick(),
            "an abort stops a script that wrote, unlike SCRIPT KILL"
        );
        c.end();
        assert!(c.take_aborted());
        assert!(!c.take_aborted());
        c.set_abort_after(Some(Duration::from_millis(1)));
        c.begin(true);
        assert!(!c.tick());
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.tick(), "past its budget");
        c.end();
        assert!(c.take_aborted());
        c.set_abort_after(None);
        c.begin(true);
        std::thread::sleep(Duration::from_millis(2));
        assert!(!c.tick());
        c.end();
        assert!(!c.take_aborted());
    }

    #[test]
    fn the_shared_counter_follows_busy_scripts() {
        let n = Arc::new(AtomicUsize::new(0));
        let a = ScriptControl::counting_busy(Duration::ZERO, n.clone());
        let b = ScriptControl::counting_busy(Duration::ZERO, n.clone());
        a.begin(true);
        b.begin(false);
        a.tick();
        a.tick();
        b.tick();
        assert_eq!(n.load(Ordering::Acquire), 2);
        a.end();
        assert_eq!(n.load(Ordering::Acquire), 1);
        b.end();
        assert_eq!(n.load(Ordering::Acquire), 0);
    }
}
