//! SLOWLOG: the last `slowlog-max-len` commands that took longer than `slowlog-log-slower-than`
//! microseconds, with Redis's entry shape (id, timestamp, duration, arguments, peer, name).

use crate::config::Config;
use crate::session::Session;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// Redis keeps at most this many arguments per entry ...
const MAX_ARGS: usize = 32;
/// ... and at most this many bytes of each.
const MAX_ARG_LEN: usize = 128;

#[derive(Clone, Debug)]
pub struct SlowEntry {
    pub id: u64,
    pub unix_secs: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    pub peer: String,
    pub name: String,
    /// Microseconds the command's run waited for a worker before it started (0 when answered
    /// on the I/O thread); kvik's extra, last field of SLOWLOG GET entries.
    pub queue_micros: u64,
}

#[derive(Default, Debug)]
pub struct SlowLog {
    entries: Mutex<VecDeque<SlowEntry>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl SlowLog {
    /// Records the command if it was slow enough, per the current configuration. `took` is the
    /// execution time; `queue_wait`, the time before a worker picked it up, is kept apart.
    pub fn maybe_record(
        &self,
        config: &Config,
        session: &Session,
        args: &[Bytes],
        took: Duration,
        queue_wait: Duration,
    ) {
        let threshold = config.slowlog_log_slower_than.load(Relaxed);
        let micros = took.as_micros() as u64;
        if threshold < 0 || micros < threshold as u64 {
            return;
        }
        let max_len = config.slowlog_max_len.load(Relaxed) as usize;
        let entry = SlowEntry {
            id: self.next_id.fetch_add(1, Relaxed),
            unix_secs: crate::clock::unix_ms() / 1000,
            micros,
            args: slow_args(args),
            peer: session.client.addr.clone(),
            name: session.client.name_string(),
            queue_micros: queue_wait.as_micros() as u64,
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// The newest `count` entries, newest first.
    pub fn get(&self, count: usize) -> Vec<SlowEntry> {
        self.entries.lock().iter().take(count).cloned().collect()
    }

    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }
}

/// Arguments as Redis stores them in a slowlog entry: at most 32, the last replaced by
/// "... (N more arguments)", each cut at 128 bytes with "... (N more bytes)".
fn slow_args(args: &[Bytes]) -> Vec<Vec<u8>> {
    let keep = if args.len() > MAX_ARGS {
        MAX_ARGS - 1
    } else {
        args.len()
    };
    let mut out: Vec<Vec<u8>> = args[..keep]
        .iter()
        .map(|a| {
            if a.len() > MAX_ARG_LEN {
                let mut v = a[..MAX_ARG_LEN].to_vec();
                v.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_LEN).as_bytes(),
                );
                v
            } else {
                a.to_vec()
            }
        })
        .collect();
    if args.len() > MAX_ARGS {
        out.push(format!("... ({} more arguments)", args.len() - keep).into_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_commands_are_shortened_like_redis() {
        let args: Vec<Bytes> = (0..40).map(|i| Bytes::from(format!("a{i}"))).collect();
        let s = slow_args(&args);
        assert_eq!(s.len(), 32);
        assert_eq!(s[31], b"... (9 more arguments)".to_vec());
        let big = vec![Bytes::from(vec![b'x'; 200])];
        let s = slow_args(&big);
        assert!(s[0].ends_with(b"... (72 more bytes)"));
    }
}
