//! Blocking commands from the command side: [`Ctx::block_on`] turns "nothing to take" into a
//! parked client, and [`serve`] re-runs the waiters of the keys a command made ready.
//!
//! A blocking command's handler is written like its non-blocking twin and is also the code that
//! serves it later. It parses every argument first, takes the stripe locks of its keys and tries
//! to serve; if there is nothing to take it calls [`Ctx::block_on`] while it still holds the
//! locks. Outside MULTI/EXEC that registers the client as a waiter on those keys (FIFO per key,
//! [`crate::blocking::Blocking`]) and writes nothing; the worker then hands the connection's
//! session back to its I/O thread marked [`Session::blocked`], and the I/O thread parks the
//! connection: it runs nothing more of it (pipelined commands wait, as in Redis) and holds no
//! worker until the client is served, times out, is unblocked (CLIENT UNBLOCK), killed or
//! disconnects.
//!
//! Serving: a command that wrote a list, sorted set or stream somebody waits on returns the key as
//! [`Ready`] ([`super::execute`]); the worker then calls [`serve`] before the connection's next
//! command (as Redis does after each command): for each ready key, for each of its waiters in
//! arrival order, it claims the waiter and re-runs the waiter's own handler (same arguments, the
//! waiter's database and protocol). [`Ctx::block_on`] in that re-run means "still nothing": the
//! waiter is released and keeps its place. Otherwise the reply goes to the waiter's I/O thread
//! (its `ClientInfo::io`).

use super::ctx::{CmdError, CmdResult, Ctx, Mode, Reply};
use super::{table, Entry, INTERNAL_ERROR};
use crate::blocking::{take_ready, Blocked, Claimed, TimeoutReply, Waiter};
use crate::server::Server;
use crate::session::Session;
use crate::storage::encoding::Kind;
use bytes::Bytes;

/// Keys (db, key) that got data while clients waited on them: what a command returns for its
/// worker to [`serve`].
#[derive(Debug, Default)]
#[must_use = "blocked clients wait until the ready keys are served"]
pub struct Ready(Vec<(u16, Vec<u8>)>);

impl Ready {
    /// The keys the commands this thread just ran made ready.
    pub(super) fn collect() -> Ready {
        Ready(take_ready())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Parses a blocking command's timeout (seconds, decimals allowed, as Redis's
/// `getTimeoutFromObjectOrReply`) into a deadline in Unix ms; 0 means "block forever" (so does a
/// timeout below one millisecond, as in Redis).
pub fn parse_timeout(arg: &[u8]) -> Result<u64, CmdError> {
    parse_timeout_at(arg, crate::clock::unix_ms())
}

fn parse_timeout_at(arg: &[u8], now_ms: u64) -> Result<u64, CmdError> {
    let secs = match kvik_resp::parse_redis_double(arg) {
        Some(v) => v,
        // Redis reads a long double, so a value beyond a double's range (1e400) is a number
        // there; converted to milliseconds it overflows to a negative integer.
        None => match std::str::from_utf8(arg)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
        {
            Some(v) if v.is_infinite() && !arg.is_empty() && !arg[0].is_ascii_whitespace() => v,
            _ => return Err(CmdError::err("timeout is not a float or out of range")),
        },
    };
    let ms = secs * 1000.0;
    // C's (long long) cast of an out-of-range value gives LLONG_MIN on x86: "negative".
    let ms: i64 = if ms.is_finite() && ms > -9.2e18 && ms < 9.2e18 {
        ms as i64
    } else {
        i64::MIN
    };
    if ms < 0 {
        return Err(CmdError::err("timeout is negative"));
    }
    if ms == 0 {
        return Ok(0);
    }
    Ok(now_ms.saturating_add(ms as u64))
}

/// Serves the clients blocked on the `ready` keys (called by the worker after each top-level
/// command, with no key lock held), and on the keys their own commands make ready in turn.
/// Cheap when nothing is ready.
pub fn serve(server: &Server, mut ready: Ready) {
    while !ready.is_empty() {
        let mut next = Vec::new();
        for (db, key) in ready.0 {
            next.extend(serve_key(server, db, &key).0);
        }
        ready = Ready(next);
    }
}

/// Serves the waiters of one key until it runs dry; returns the keys their commands made ready.
fn serve_key(server: &Server, db: u16, key: &[u8]) -> Ready {
    let registry = &server.blocking;
    let mut made_ready = Vec::new();
    let mut still_waiting = Vec::new();
    loop {
        let physical = server.storage.dbs().physical(db);
        let kind = match server
            .storage
            .get_live(physical, key, crate::clock::unix_ms())
        {
            Ok(Some(m)) if matches!(m.kind, Kind::List | Kind::ZSet | Kind::Stream) => m.kind,
            _ => break, // ran dry, or no longer a key anyone waits on
        };
        let Some((id, w)) = registry.claim_next(db, key, kind, &still_waiting) else {
            break;
        };
        let reply = rerun(server, id, &w, key);
        made_ready.extend(Ready::collect().0);
        match reply {
            Some(reply) => {
                registry.release(id, true);
                let reply = match server.storage.make_durable() {
                    Ok(()) => reply,
                    Err(e) => {
                        let mut out = Reply::new(w.proto);
                        out.error(&CmdError::err(format!("WAL flush failed: {e}")));
                        out.buf
                    }
                };
                w.client.io().notify_unblocked(w.client.id, reply);
            }
            None => {
                registry.release(id, false);
                // A stream read takes nothing: the waiters after this one (other IDs, other
                // groups) may still be served. A list or sorted set ran dry.
                if kind != Kind::Stream {
                    break;
                }
                still_waiting.push(id);
            }
        }
    }
    Ready(made_ready)
}

/// Re-runs a waiter's command for its `ready` key; `None` if it would still block.
fn rerun(server: &Server, id: u64, w: &Claimed, ready: &[u8]) -> Option<Vec<u8>> {
    let entry = table().resolve(&w.args).ok()?;
    let args = ready_key_first(entry, &w.args, ready);
    crate::tracking::set_current(w.client.id);
    let mut session = Session::new(w.client.clone(), true);
    session.db = w.db;
    session.proto = w.proto;
    session.blocked = Some(Blocked {
        waiter: id,
        deadline_ms: 0,
        timeout: w.timeout,
        serving: true,
    });
    let mut out = Reply::new(w.proto);
    let (result, blocked_again) = {
        let db = Ctx::physical_db(server, &session);
        let mut ctx = Ctx {
            db,
            server,
            session: &mut session,
            out: &mut out,
            now_ms: crate::clock::unix_ms(),
            mode: Mode::Normal,
            args: &args,
            blocked_again: false,
            deferred_lookups: Default::default(),
        };
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            (entry.spec.handler)(&mut ctx, &args)
        }))
        .unwrap_or(Err(INTERNAL_ERROR));
        (result, ctx.blocked_again)
    };
    match result {
        Ok(()) if blocked_again => None,
        Ok(()) => Some(out.buf),
        Err(e) => {
            out.buf.clear();
            out.error(&e);
            Some(out.buf)
        }
    }
}

/// A waiter of several keys is served from the key that became ready, as Redis serves it (the
/// key its write signalled, not the first of the command's keys that has data): the pops that
/// take from the first non-empty key of their list get `ready` moved to the front.
fn ready_key_first(entry: &Entry, args: &[Bytes], ready: &[u8]) -> Vec<Bytes> {
    const POPS: &[&str] = &["blpop", "brpop", "blmpop", "bzpopmin", "bzpopmax", "bzmpop"];
    let positions = entry.spec.key_positions(args);
    let mut out = args.to_vec();
    if !POPS.contains(&entry.full_name.as_str()) {
        return out;
    }
    let Some(at) = positions.iter().position(|&p| &args[p][..] == ready) else {
        return out;
    };
    let mut order: Vec<usize> = positions.clone();
    let first = order.remove(at);
    order.insert(0, first);
    for (&dst, &src) in positions.iter().zip(&order) {
        out[dst] = args[src].clone();
    }
    out
}

impl Ctx<'_> {
    /// Blocks the client on `keys` (see the module doc): call it from a blocking command's
    /// handler, holding the keys' stripe locks, when there is nothing to take. Inside MULTI/EXEC
    /// it writes the timeout reply at once (Redis never blocks there); in a waiter's re-run it
    /// notes that the waiter stays blocked. Only a key of `kind` serves it (as in Redis 7.0, a
    /// blocked BLPOP stays blocked when its key becomes a string). `deadline_ms` comes from
    /// [`parse_timeout`] (0 = forever).
    pub fn block_on<K: AsRef<[u8]>>(
        &mut self,
        kind: Kind,
        keys: &[K],
        deadline_ms: u64,
        timeout: TimeoutReply,
    ) -> CmdResult {
        let args = self.args.to_vec();
        self.block_on_args(kind, keys, deadline_ms, timeout, args)
    }

    /// [`Ctx::block_on`] with the command the waiter re-runs given explicitly: XREAD parks with
    /// its `$` IDs replaced by the IDs they stood for when it was called.
    pub fn block_on_args<K: AsRef<[u8]>>(
        &mut self,
        kind: Kind,
        keys: &[K],
        deadline_ms: u64,
        timeout: TimeoutReply,
        args: Vec<bytes::Bytes>,
    ) -> CmdResult {
        // A command run to completion on an I/O thread never parks there: the pool runs it
        // again and blocks it (nothing was changed before a command blocks).
        if self.mode.no_wait() {
            return Err(CmdError::WOULD_BLOCK);
        }
        if self.session.in_exec {
            timeout.encode(&mut self.out.buf, self.out.proto);
            return Ok(());
        }
        if self.serving_waiter() {
            self.blocked_again = true;
            return Ok(());
        }
        let keys: Vec<Vec<u8>> = keys.iter().map(|k| k.as_ref().to_vec()).collect();
        let id = self.server.blocking.register(Waiter {
            keys,
            args,
            db: self.session.db,
            proto: self.session.proto,
            client: self.session.client.clone(),
            timeout,
            kind,
            claimed: false,
        });
        self.session.blocked = Some(Blocked {
            waiter: id,
            deadline_ms,
            timeout,
            serving: false,
        });
        Ok(())
    }

    /// True while a worker re-runs a blocked client's command to serve it.
    pub fn serving_waiter(&self) -> bool {
        self.session.blocked.is_some_and(|b| b.serving)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_parsing_matches_redis() {
        let now = 1_000_000;
        assert_eq!(parse_timeout_at(b"0", now), Ok(0));
        assert_eq!(parse_timeout_at(b"1", now), Ok(now + 1000));
        assert_eq!(parse_timeout_at(b"0.5", now), Ok(now + 500));
        assert_eq!(parse_timeout_at(b".5", now), Ok(now + 500));
        assert_eq!(parse_timeout_at(b"0x10", now), Ok(now + 16000));
        // Below a millisecond rounds to 0: forever, as in Redis.
        assert_eq!(parse_timeout_at(b"0.0001", now), Ok(0));
        assert_eq!(parse_timeout_at(b"-0.0001", now), Ok(0));
        let not_float = Err(CmdError::err("timeout is not a float or out of range"));
        let negative = Err(CmdError::err("timeout is negative"));
        for bad in [&b"abc"[..], b"", b" 1", b"1 ", b"nan", b"1e"] {
            assert_eq!(parse_timeout_at(bad, now), not_float, "{bad:?}");
        }
        for neg in [&b"-1"[..], b"inf", b"-inf", b"1e17", b"1e400"] {
            assert_eq!(parse_timeout_at(neg, now), negative, "{neg:?}");
        }
    }
}
