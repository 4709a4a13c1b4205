//! One client connection as its I/O thread sees it: socket, query buffer and request parser,
//! output buffer, and the session while no job holds it.
//!
//! Memory per connection is bounded: the query buffer by `client-query-buffer-limit` (and by not
//! reading while a job runs or while output is backed up), the output buffer by backpressure
//! (no new commands are parsed or run while more than [`OUTPUT_BACKPRESSURE`] bytes wait to be
//! sent, and a job stops once its own replies pass that size, leaving the rest of its commands
//! in [`Conn::leftover`]) and by `client-output-buffer-limit`.

use crate::clients::ClientInfo;
use crate::config::OutputLimit;
use crate::session::Session;
use bytes::{Bytes, BytesMut};
use kvik_resp::{Limits, ProtocolError, RequestArgs, RequestParser};
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Instant;

/// Bytes read per `read` call.
pub const READ_CHUNK: usize = 16 * 1024;
/// Most bytes read from one connection per turn of the event loop, so one client cannot starve
/// the others on its thread.
pub const READ_BUDGET: usize = 256 * 1024;
/// While more output than this waits, the connection's requests are left unparsed (and its
/// socket unread): a client that pipelines and never reads is slowed by TCP, not by our memory.
pub const OUTPUT_BACKPRESSURE: usize = 1024 * 1024;
/// Most commands handed to the pool in one job.
pub const MAX_RUN: usize = 1024;
/// Capacity of a drained output buffer above which it is given back to the allocator.
const KEEP_WBUF: usize = 64 * 1024;

/// Outcome of reading the socket.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadOutcome {
    /// Drained the socket (WouldBlock).
    Drained,
    /// Read the budget's worth; more may be waiting.
    MoreWaiting,
    /// The peer closed its side.
    Eof,
}

pub struct Conn {
    pub stream: TcpStream,
    pub client: Arc<ClientInfo>,
    rbuf: BytesMut,
    parser: RequestParser,
    wbuf: Vec<u8>,
    wpos: usize,
    /// `None` while a pool job runs this connection's commands.
    pub session: Option<Session>,
    /// Set by QUIT, protocol errors and limits: flush what is queued, then close.
    pub close_after_write: bool,
    /// The peer closed; finish what was read, then close.
    pub peer_closed: bool,
    /// An event reported the peer's side closed (or an error): reads go on to WouldBlock or
    /// EOF, since no further edge may come (see [`Conn::read`]).
    pub hangup_seen: bool,
    /// The socket failed, or the output limit was broken: queued output is dropped and the
    /// connection closes as soon as no job holds it.
    pub write_failed: bool,
    /// Parsing stopped because more than [`OUTPUT_BACKPRESSURE`] bytes wait to be sent.
    pub throttled: bool,
    /// Listed in its I/O thread's `held` (CLIENT PAUSE holds its next command): listed once.
    pub held: bool,
    /// A protocol error found after the commands before it, reported once they have run.
    pub pending_error: Option<ProtocolError>,
    /// Commands parsed but not yet run: the tail of a job that stopped early because its
    /// replies passed [`OUTPUT_BACKPRESSURE`]. They run, in order, before anything new is parsed.
    pub leftover: Vec<Vec<Bytes>>,
    /// Commands parsed but not yet run because the first one found a key another thread held
    /// ([`crate::cmd::Outcome::Contended`]): the I/O thread runs them on its next turn, once
    /// its own turn has let its keys go, before anything new is parsed.
    pub retry: Vec<Vec<Bytes>>,
    /// Turns in a row the head of `retry` was put off (bounded by `rtc-lock-retries`).
    pub retries: u32,
    /// The WAL ticket its latest write got, while the WAL's sync thread has not made it durable
    /// (`fsync-thread`): its output waits until the sync covers it (0: nothing waits).
    pub sync_wait: u64,
    /// When it last moved to another I/O thread (`io-key-affinity`).
    pub moved_at: Option<Instant>,
    /// The hash of the key its last put-off command found held (`io-key-affinity`).
    pub contended_on: Option<u64>,
    /// Argument vectors of commands answered on the I/O thread, for the next requests.
    pub spare: SpareArgs,
    /// When the output buffer first exceeded the soft limit.
    soft_limit_since: Option<Instant>,
    /// The reply of a blocked command that arrived before the completion of the job that
    /// blocked it (see [`crate::blocking`]).
    pub wake: Option<Vec<u8>>,
}

impl Conn {
    pub fn new(stream: TcpStream, client: Arc<ClientInfo>, session: Session) -> Conn {
        Conn {
            stream,
            client,
            rbuf: BytesMut::with_capacity(READ_CHUNK),
            parser: RequestParser::new(),
            wbuf: Vec::new(),
            wpos: 0,
            session: Some(session),
            close_after_write: false,
            peer_closed: false,
            hangup_seen: false,
            write_failed: false,
            throttled: false,
            held: false,
            pending_error: None,
            leftover: Vec::new(),
            retry: Vec::new(),
            retries: 0,
            sync_wait: 0,
            moved_at: None,
            contended_on: None,
            spare: SpareArgs::default(),
            soft_limit_since: None,
            wake: None,
        }
    }

    pub fn in_pool(&self) -> bool {
        self.session.is_none()
    }

    /// Parked: its command blocked (BLPOP...) and waits to be served; nothing of it runs.
    pub fn parked(&self) -> Option<crate::blocking::Blocked> {
        self.session.as_ref().and_then(|s| s.blocked)
    }

    /// Bytes of output not yet written to the socket.
    /// The connection's socket and the output not yet sent, for a hand-off (PSYNC).
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        let pending = self.wbuf[self.wpos..].to_vec();
        (self.stream, pending)
    }

    pub fn pending_output(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    pub fn query_len(&self) -> usize {
        self.rbuf.len()
    }

    /// Reads what the socket has, up to [`READ_BUDGET`]. Returns the bytes read and the outcome.
    ///
    /// A read shorter than `scratch` took everything the socket held at that moment, so it
    /// counts as drained without the read that would answer WouldBlock: the sockets are
    /// registered edge-triggered, and data or a FIN arriving after a read that emptied the
    /// receive queue raises a new event. (Reading on to WouldBlock cost one more syscall per
    /// request.) Not once an event reported a hangup: the FIN may already be queued behind the
    /// data, with no edge to come.
    pub fn read(&mut self, scratch: &mut [u8]) -> io::Result<(usize, ReadOutcome)> {
        if self.rbuf.is_empty() && self.rbuf.capacity() > READ_BUDGET + READ_CHUNK {
            // Give back the memory of a big request that is gone (Redis shrinks idle query
            // buffers the same way).
            self.rbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        let mut total = 0;
        while total < READ_BUDGET {
            // Reading into the I/O thread's scratch buffer and copying what arrived costs a copy
            // of the bytes read; reading into freshly grown query-buffer space would cost zeroing
            // a whole chunk per read (it showed as 5% of a GET profile).
            match self.stream.read(scratch) {
                Ok(0) => return Ok((total, ReadOutcome::Eof)),
                Ok(n) => {
                    self.rbuf.extend_from_slice(&scratch[..n]);
                    total += n;
                    if n < scratch.len() && !self.hangup_seen {
                        return Ok((total, ReadOutcome::Drained));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok((total, ReadOutcome::Drained));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok((total, ReadOutcome::MoreWaiting))
    }

    /// Parses up to `max` complete requests from the query buffer. A protocol error stops
    /// parsing and is kept in `pending_error` (the requests before it still run, as in Redis).
    pub fn parse_run(&mut self, limits: &Limits, max: usize) -> Vec<Vec<Bytes>> {
        parse_requests(
            &mut self.parser,
            &mut self.rbuf,
            limits,
            max,
            &mut self.pending_error,
            &mut self.spare,
        )
    }

    /// Queues reply bytes.
    pub fn queue_output(&mut self, bytes: &[u8]) {
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        }
        self.wbuf.extend_from_slice(bytes);
    }

    /// Writes queued output until the socket would block. Returns bytes written.
    pub fn flush(&mut self) -> io::Result<usize> {
        let mut total = 0;
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            if self.wbuf.capacity() > KEEP_WBUF {
                self.wbuf = Vec::new();
            }
        }
        Ok(total)
    }

    /// True if the output buffer broke the configured limit (hard, or soft for too long).
    pub fn output_over_limit(&mut self, limit: OutputLimit) -> bool {
        let pending = self.pending_output() as u64;
        if limit.hard > 0 && pending >= limit.hard {
            return true;
        }
        if limit.soft > 0 && pending >= limit.soft {
            let since = *self.soft_limit_since.get_or_insert_with(Instant::now);
            return since.elapsed().as_secs() >= limit.soft_secs;
        }
        self.soft_limit_since = None;
        false
    }
}

/// Emptied vectors of the requests a connection's I/O thread answered itself, reused by the
/// next [`parse_requests`]: with the parser's recycled spans, a connection whose commands are
/// answered on its I/O thread parses without allocating (the `hit_path` bench counts it).
/// Bounded: a few dozen small vectors per connection.
#[derive(Debug, Default)]
pub struct SpareArgs {
    args: Vec<Vec<Bytes>>,
    run: Vec<Vec<Bytes>>,
}

impl SpareArgs {
    /// Argument vectors kept.
    const KEEP: usize = 32;
    /// Largest argument vector kept (arguments).
    const KEEP_ARGS: usize = 16;

    /// Takes back a command's arguments once it ran (its bytes are released now).
    pub fn give_args(&mut self, mut args: Vec<Bytes>) {
        if self.args.len() < Self::KEEP && args.capacity() <= Self::KEEP_ARGS {
            args.clear();
            self.args.push(args);
        }
    }

    /// Takes back an emptied (or fully answered) run and its commands' arguments.
    pub fn give_run(&mut self, mut run: Vec<Vec<Bytes>>) {
        for args in run.drain(..) {
            self.give_args(args);
        }
        if run.capacity() <= MAX_RUN && run.capacity() > self.run.capacity() {
            self.run = run;
        }
    }
}

/// [`Conn::parse_run`] over a bare query buffer (also what the hit-path bench drives): up to
/// `max` requests taken off the front of `rbuf`, their multibulk arguments slices of it (no
/// copy), in vectors from `spare` where it has them. A protocol error stops parsing and lands
/// in `pending_error`.
pub fn parse_requests(
    parser: &mut RequestParser,
    rbuf: &mut BytesMut,
    limits: &Limits,
    max: usize,
    pending_error: &mut Option<ProtocolError>,
    spare: &mut SpareArgs,
) -> Vec<Vec<Bytes>> {
    let mut run = std::mem::take(&mut spare.run);
    while run.len() < max && pending_error.is_none() {
        match parser.parse(rbuf, limits) {
            Ok(Some(req)) => {
                let chunk = rbuf.split_to(req.consumed).freeze();
                let mut args = spare.args.pop().unwrap_or_default();
                match req.args {
                    RequestArgs::Spans(spans) => {
                        args.extend(spans.iter().map(|r| chunk.slice(r.clone())));
                        parser.recycle(spans);
                    }
                    RequestArgs::Inline(inline) => args.extend(inline.into_iter().map(Bytes::from)),
                }
                if args.is_empty() {
                    spare.give_args(args);
                } else {
                    run.push(args);
                }
            }
            Ok(None) => break,
            Err(e) => *pending_error = Some(e),
        }
    }
    run
}
