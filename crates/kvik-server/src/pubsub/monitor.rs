//! MONITOR: every command the server runs, as one line per command, to each client that asked.
//!
//! The line is Redis's: `+<unix secs>.<micros> [<db> <client addr>] "arg" "arg"...`, with
//! `[<db> lua]` for a command a script ran, arguments quoted as Redis's `sdscatrepr` does, and
//! the secrets of AUTH, HELLO ... AUTH and MIGRATE ... AUTH/AUTH2 shown as `"(redacted)"`. It is
//! built once per command and appended to each monitor's pub/sub mailbox, so it reaches the
//! client the way published messages do (the owning I/O thread moves it to the output), and
//! it is bounded the same way: a monitor whose unsent output would pass the `pubsub` hard limit
//! of `client-output-buffer-limit` is disconnected. With no monitor, feeding costs one load.

use super::PubSub;
use crate::clients::ClientInfo;
use bytes::Bytes;
use std::io::Write;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

/// Where a monitored command came from.
#[derive(Clone, Copy, Debug)]
pub enum Origin<'a> {
    /// A client, by its address (`ip:port`).
    Client(&'a str),
    /// A script's `redis.call`.
    Lua,
}

/// A client's registration as a monitor; dropping it (disconnect, RESET) ends it.
pub struct MonitorGuard {
    pubsub: Arc<PubSub>,
    id: u64,
}

impl std::fmt::Debug for MonitorGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MonitorGuard({})", self.id)
    }
}

impl Drop for MonitorGuard {
    fn drop(&mut self) {
        let mut list = self.pubsub.monitors.write();
        list.retain(|c| c.id != self.id);
        self.pubsub.monitor_count.store(list.len(), Relaxed);
    }
}

impl PubSub {
    /// Makes `client` a monitor until the returned guard is dropped.
    pub fn add_monitor(self: &Arc<Self>, client: Arc<ClientInfo>) -> MonitorGuard {
        let id = client.id;
        let mut list = self.monitors.write();
        list.push(client);
        self.monitor_count.store(list.len(), Relaxed);
        MonitorGuard {
            pubsub: self.clone(),
            id,
        }
    }

    /// Whether anyone monitors (the dispatcher's fast path).
    pub fn monitoring(&self) -> bool {
        self.monitor_count.load(Relaxed) > 0
    }

    /// Sends the line of one command to every monitor.
    pub fn feed_monitors(&self, db: u16, origin: Origin<'_>, args: &[Bytes]) {
        let line = monitor_line(crate::clock::unix_us(), db, origin, args);
        for client in self.monitors.read().iter() {
            self.push_limited(client, &line);
        }
    }
}

/// The arguments MONITOR must not show, as indexes into `args`.
fn redacted(args: &[Bytes]) -> Vec<usize> {
    let name = args
        .first()
        .map(|a| a.to_ascii_lowercase())
        .unwrap_or_default();
    let token = |i: usize, t: &[u8]| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(t));
    match name.as_slice() {
        b"auth" => (1..args.len()).collect(),
        b"hello" => (2..args.len())
            .filter(|&i| token(i, b"auth"))
            .flat_map(|i| [i + 1, i + 2])
            .filter(|&i| i < args.len())
            .collect(),
        b"migrate" => (6..args.len())
            .flat_map(|i| {
                if token(i, b"auth") {
                    vec![i + 1]
                } else if token(i, b"auth2") {
                    vec![i + 1, i + 2]
                } else {
                    vec![]
                }
            })
            .filter(|&i| i < args.len())
            .collect(),
        _ => Vec::new(),
    }
}

/// One MONITOR line, CRLF included.
pub fn monitor_line(unix_us: u64, db: u16, origin: Origin<'_>, args: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + args.iter().map(|a| a.len() + 3).sum::<usize>());
    let _ = write!(
        out,
        "+{}.{:06} [{db} ",
        unix_us / 1_000_000,
        unix_us % 1_000_000
    );
    match origin {
        Origin::Client(addr) => out.extend_from_slice(addr.as_bytes()),
        Origin::Lua => out.extend_from_slice(b"lua"),
    }
    out.push(b']');
    let hidden = redacted(args);
    for (i, a) in args.iter().enumerate() {
        out.push(b' ');
        if hidden.contains(&i) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote_into(&mut out, a);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// `s` in double quotes, escaped as Redis's `sdscatrepr`.
fn quote_into(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            c if c.is_ascii_graphic() || c == b' ' => out.push(c),
            c => {
                let _ = write!(out, "\\x{c:02x}");
            }
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&[u8]]) -> Vec<Bytes> {
        a.iter().map(|s| Bytes::copy_from_slice(s)).collect()
    }

    #[test]
    fn lines_are_redis_lines() {
        let line = monitor_line(
            1_339_518_083_107_412,
            0,
            Origin::Client("127.0.0.1:60866"),
            &args(&[b"keys", b"*"]),
        );
        assert_eq!(
            line,
            b"+1339518083.107412 [0 127.0.0.1:60866] \"keys\" \"*\"\r\n"
        );
        let line = monitor_line(
            5_000_001,
            3,
            Origin::Lua,
            &args(&[b"set", b"a b", b"x\"y\n\x01\xff"]),
        );
        assert_eq!(
            String::from_utf8(line).unwrap(),
            "+5.000001 [3 lua] \"set\" \"a b\" \"x\\\"y\\n\\x01\\xff\"\r\n"
        );
        let line = monitor_line(
            0,
            0,
            Origin::Lua,
            &args(&[b"hello", b"3", b"AUTH", b"u", b"p"]),
        );
        assert!(String::from_utf8(line)
            .unwrap()
            .ends_with("\"hello\" \"3\" \"AUTH\" \"(redacted)\" \"(redacted)\"\r\n"));
        let line = monitor_line(0, 0, Origin::Lua, &args(&[b"auth", b"pw"]));
        assert!(String::from_utf8(line)
            .unwrap()
            .ends_with("\"auth\" \"(redacted)\"\r\n"));
    }
}
