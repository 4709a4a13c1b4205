//! The worker's side of the request path: runs a connection's run of commands, in order, and
//! hands back what the I/O thread needs to carry on (the session, the replies, the commands
//! left for later).
//!
//! The first command runs in the mode the I/O thread chose ([`Mode::SkipCache`] after it missed
//! the cache there), the rest normally; each command's slowlog entry carries the job's queue
//! wait. After each command the clients blocked on keys it filled are served, before the
//! connection's next command (as Redis does). The run stops early after QUIT (the rest is
//! dropped), when a command blocks the client or is held by CLIENT PAUSE, or once its replies pass `max_output` (the rest
//! comes back in [`Ran::rest`] and runs when the client has read enough), so a pipeline of big
//! reads cannot make one job's output unbounded. The run's replies go back only after its writes
//! are in the WAL ([`crate::storage::Storage::make_durable`]: one flush for the whole run, shared
//! with whatever other workers wrote meanwhile).

use super::blocked::{self, Ready};
use super::ctx::{CmdError, Mode, Reply};
use super::{execute, INTERNAL_ERROR};
use crate::server::Server;
use crate::session::Session;
use bytes::Bytes;
use std::time::Duration;

/// What a worker hands back to the connection's I/O thread.
pub struct Ran {
    pub session: Session,
    pub reply: Reply,
    /// Commands not run (output backpressure, or the client blocked); empty after QUIT.
    pub rest: Vec<Vec<Bytes>>,
}

/// Runs `run` for `session` on this worker; `queue_wait` is how long the job waited for it.
pub fn run_commands(
    server: &Server,
    mut session: Session,
    run: Vec<Vec<Bytes>>,
    first_mode: Mode,
    queue_wait: Duration,
    max_output: usize,
) -> Ran {
    server.stats.queue_wait.record(queue_wait);
    let mut reply = Reply::new(session.proto);
    let mut run = run.into_iter();
    let mut mode = first_mode;
    let mut held = None;
    for args in run.by_ref() {
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            execute(server, &mut session, &mut reply, &args, mode, queue_wait)
        }));
        mode = Mode::Normal;
        let ready = ran.unwrap_or_else(|_| {
            tracing::error!(command = %String::from_utf8_lossy(&args[0]), "command panicked");
            reply.error(&INTERNAL_ERROR);
            Ready::collect()
        });
        if session.paused.is_some() {
            held = Some(args); // CLIENT PAUSE: not run; the I/O thread holds the rest
            break;
        }
        blocked::serve(server, ready);
        if session.close_after_reply || session.blocked.is_some() || reply.buf.len() > max_output {
            break;
        }
    }
    // Group commit: the replies leave only once the writes they acknowledge are in the WAL.
    if let Err(e) = server.storage.make_durable() {
        tracing::error!(error = %e, "WAL flush failed; closing the client unacknowledged");
        reply.buf.clear();
        reply.error(&CmdError::err(format!("WAL flush failed: {e}")));
        session.close_after_reply = true;
    }
    let rest = if session.close_after_reply {
        Vec::new()
    } else {
        held.into_iter().chain(run).collect()
    };
    Ran {
        session,
        reply,
        rest,
    }
}
