//! The ACL log (ACL LOG): the most recent refusals and failed logins, newest first, at most
//! `acllog-max-len` of them. A refusal like one logged in the last minute (same reason,
//! context, object and user) only bumps that entry's count, as in Redis.

use crate::server::Server;
use crate::session::Session;
use std::collections::VecDeque;

/// Refusals this close together (ms) are one entry.
const GROUP_MS: u64 = 60_000;

#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    /// `command`, `key`, `channel` or `auth`.
    pub reason: &'static str,
    /// `toplevel`, `multi` or `lua`.
    pub context: &'static str,
    /// The command, key or channel refused (`AUTH` / `HELLO` for a failed login).
    pub object: String,
    pub username: String,
    /// When the entry was last updated (unix ms).
    pub at_ms: u64,
    /// The CLIENT LIST line of the client refused.
    pub client_info: String,
}

#[derive(Debug, Default)]
pub struct AclLog {
    entries: VecDeque<Entry>,
}

impl AclLog {
    /// Adds `e`, or counts it on a recent matching entry; keeps at most `max` entries.
    pub fn add(&mut self, e: Entry, max: usize) {
        let same = self.entries.iter().position(|o| {
            o.reason == e.reason
                && o.context == e.context
                && o.object == e.object
                && o.username == e.username
                && e.at_ms.saturating_sub(o.at_ms) < GROUP_MS
        });
        match same.and_then(|i| self.entries.remove(i)) {
            Some(mut o) => {
                o.count += 1;
                o.at_ms = e.at_ms;
                o.client_info = e.client_info;
                self.entries.push_front(o);
            }
            None => self.entries.push_front(e),
        }
        self.entries.truncate(max);
    }

    /// The newest `n` entries.
    pub fn newest(&self, n: usize) -> Vec<Entry> {
        self.entries.iter().take(n).cloned().collect()
    }

    pub fn reset(&mut self) {
        self.entries.clear();
    }
}

/// `acllog-max-len`.
fn max_len(server: &Server) -> usize {
    crate::config::redis_params_value(&server.config, "acllog-max-len")
        .and_then(|v| v.parse().ok())
        .unwrap_or(128)
}

/// Logs a refusal of `session`'s command (or a failed login).
pub fn record(
    server: &Server,
    session: &Session,
    reason: &'static str,
    context: &'static str,
    object: String,
    username: &str,
) {
    let now = crate::clock::unix_ms();
    let client_info = crate::cmd::client::client_line(&session.client, now);
    let entry = Entry {
        count: 1,
        reason,
        context,
        object,
        username: username.to_string(),
        at_ms: now,
        client_info,
    };
    let max = max_len(server);
    server.config.acl.log.lock().add(entry, max);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(object: &str, at_ms: u64) -> Entry {
        Entry {
            count: 1,
            reason: "key",
            context: "toplevel",
            object: object.into(),
            username: "u".into(),
            at_ms,
            client_info: String::new(),
        }
    }

    #[test]
    fn groups_recent_repeats_and_bounds_length() {
        let mut log = AclLog::default();
        log.add(entry("a", 0), 2);
        log.add(entry("b", 1), 2);
        log.add(entry("a", 2), 2);
        let all = log.newest(10);
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].object.as_str(), all[0].count), ("a", 2));
        log.add(entry("c", 3), 2);
        log.add(entry("a", 3 + GROUP_MS), 2);
        let all = log.newest(10);
        assert_eq!(all.len(), 2);
        assert_eq!((all[0].object.as_str(), all[0].count), ("a", 1));
    }
}
