//! [`Connection`]: one TCP connection shared by any number of threads and tasks, with auto-batch
//! flush (group commit of many callers' commands into one write).
//!
//! DESIGN
//!
//! Submission. A caller first takes an in-flight permit (`Permits`; the wait for one counts
//! against its deadline), then pushes its encoded command with its reply `Slot` onto the
//! lock-free `TaskList` (the crate `kvik-pool-list`, shared with the server's worker pool), then tries to become the flusher by swapping the `flushing` flag
//! from false to true. The winner takes everything queued, writes it in chunks of at most
//! `max_batch_commands` commands / `max_batch_bytes` bytes (one `write` each, normally exactly
//! one), and repeats until the queue is empty; then it clears the flag and looks at the queue
//! once more, because a producer may have pushed after the last take and failed to get the flag
//! while it was still set (the lost-wakeup race). Losers simply go and wait for their reply.
//! There is no timer: a lone command is written by its own caller at once; batches form only
//! while a write is in progress and others queue behind it.
//!
//! Hand-off. Under sustained load the queue refills as fast as replies return, and a flusher
//! that looped "until empty" would stay everyone's writer while its own reply sat waiting.
//! After `MAX_ROUNDS` writes it therefore parks what it took in `handoff`, marks the oldest
//! live caller among those entries `must_flush` and wakes it, and goes back to its own reply.
//! The woken caller (blocking or async) runs `try_flush`, which drains `handoff` before the
//! queue, so arrival order is kept. A caller that gives up while marked still flushes first.
//!
//! Ordering. Only the flag holder writes, and it appends each chunk's slots to the in-flight
//! FIFO *before* writing the chunk, so the FIFO order is exactly the byte order on the socket
//! and a reply can never arrive before its slot is registered.
//!
//! Replies. One reader thread per connection reads the socket continuously (so a writer pushing
//! a pipeline larger than the socket buffers never deadlocks against a server that is blocked
//! on writing its replies), parses frames with `kvik_resp::parse_frame`, and hands each to the
//! oldest slot. RESP3 push frames are out-of-band and skipped.
//!
//! Timeouts. A caller whose deadline passes marks its slot abandoned and returns
//! [`Error::Timeout`]. The slot stays in the queue or FIFO: an abandoned slot still queued is
//! dropped by the flusher without being written; one already written still consumes its reply
//! when it comes, and the reply is thrown away. Replies therefore never shift to the next
//! caller. Dropping an async [`ReplyFuture`] abandons its slot the same way.
//!
//! Failure. EOF, a read or write error, a protocol error or a reply with no pending command
//! closes the connection: the socket is shut down, every queued and in-flight slot fails with
//! [`Error::ConnectionClosed`] carrying the reason, and later calls fail at once. Nothing is
//! replayed here; [`Client`](crate::Client) reconnects and retries only idempotent commands,
//! only when asked to.
//!
//! Batching off. Each caller takes the writer lock, registers its slot and writes its own
//! command: one write per command, for comparison.
//!
//! Lock order: `inflight` and a slot's `state` are never held together by the flusher; the
//! reader holds `inflight` only to pop. The writer mutex is only ever taken by the flag holder
//! (batching on) or by callers in turn (batching off).

use std::collections::VecDeque;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use kvik_resp::{parse_frame, Frame, Limits, Proto};
use parking_lot::{Condvar, Mutex};

use crate::cmd::{Cmd, Pipeline};
use crate::error::{Error, Result};
use crate::local_cache::{FillToken, LocalCache, LocalCacheStats};
use crate::options::ConnectOptions;
use kvik_pool_list::TaskList;

/// Batches a flusher writes for others before handing the flusher role on.
const MAX_ROUNDS: usize = 4;

/// Where one command's (or pipeline's) replies are delivered; shared by the caller (or its
/// future) and the connection.
struct Slot {
    /// How many replies complete it (1, or a pipeline's length).
    expected: usize,
    state: Mutex<SlotState>,
    cv: Condvar,
}

#[derive(Default)]
struct SlotState {
    outcome: Option<Result<Vec<Frame>>>,
    /// Handed to the socket (set by the flusher before the write).
    sent: bool,
    /// The caller gave up: do not write it if still queued, discard its replies otherwise.
    abandoned: bool,
    /// A flusher that reached its round limit handed the rest of the queue over: this caller
    /// must run `try_flush` (see `Inner::try_flush`).
    must_flush: bool,
    waker: Option<Waker>,
}

impl Slot {
    fn new(expected: usize) -> Arc<Slot> {
        Arc::new(Slot {
            expected,
            state: Mutex::new(SlotState::default()),
            cv: Condvar::new(),
        })
    }

    /// Asks this slot's caller to become the next flusher. False if it gave up already.
    fn hand_flush(&self) -> bool {
        let waker = {
            let mut st = self.state.lock();
            if st.abandoned {
                return false;
            }
            st.must_flush = true;
            st.waker.take()
        };
        self.cv.notify_one();
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    fn complete(&self, r: Result<Vec<Frame>>) {
        let waker = {
            let mut st = self.state.lock();
            if st.abandoned {
                return;
            }
            st.outcome = Some(r);
            st.waker.take()
        };
        self.cv.notify_one();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

struct Entry {
    bytes: Vec<u8>,
    slot: Arc<Slot>,
}

/// A counting semaphore bounding commands queued or awaiting replies, usable from blocking
/// callers (condvar with deadline) and futures (stored wakers).
struct Permits {
    used: AtomicUsize,
    max: usize,
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cv: Condvar,
    async_waiting: AtomicUsize,
    wakers: Mutex<Vec<Waker>>,
}

impl Permits {
    fn new(max: usize) -> Permits {
        Permits {
            used: AtomicUsize::new(0),
            max: max.max(1),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cv: Condvar::new(),
            async_waiting: AtomicUsize::new(0),
            wakers: Mutex::new(Vec::new()),
        }
    }

    fn try_acquire(&self) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            if cur >= self.max {
                return false;
            }
            match self
                .used
                .compare_exchange_weak(cur, cur + 1, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }

    fn acquire(&self, deadline: Instant) -> bool {
        if self.try_acquire() {
            return true;
        }
        let mut g = self.lock.lock();
        // SeqCst pairs with release(): either it sees us waiting, or our next try sees its
        // decrement.
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let got = loop {
            if self.try_acquire() {
                break true;
            }
            if self.cv.wait_until(&mut g, deadline).timed_out() {
                break self.try_acquire();
            }
        };
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        got
    }

    /// Registers a task to wake when a permit is released; the caller retries afterwards.
    fn register(&self, w: &Waker) {
        let mut ws = self.wakers.lock();
        if !ws.iter().any(|x| x.will_wake(w)) {
            ws.push(w.clone());
        }
        self.async_waiting.store(ws.len(), Ordering::SeqCst);
    }

    fn release(&self) {
        self.used.fetch_sub(1, Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock();
            self.cv.notify_one();
        }
        if self.async_waiting.load(Ordering::SeqCst) > 0 {
            let ws = {
                let mut ws = self.wakers.lock();
                self.async_waiting.store(0, Ordering::SeqCst);
                std::mem::take(&mut *ws)
            };
            ws.into_iter().for_each(Waker::wake);
        }
    }
}

struct Writer {
    stream: TcpStream,
    buf: Vec<u8>,
    slots: Vec<Arc<Slot>>,
}

#[derive(Default)]
struct InFlight {
    slots: VecDeque<Arc<Slot>>,
    closed: Option<String>,
}

struct Inner {
    addr: String,
    batching: bool,
    max_batch_commands: usize,
    max_batch_bytes: usize,
    allow_blocking: bool,
    timeout: Duration,
    proto: Proto,
    queue: TaskList<Entry>,
    flushing: AtomicBool,
    /// Entries taken from the queue by a flusher that reached `MAX_ROUNDS`, waiting for the
    /// successor it woke; flushed before anything newer.
    handoff: Mutex<Vec<Entry>>,
    handoff_pending: AtomicBool,
    writer: Mutex<Writer>,
    inflight: Mutex<InFlight>,
    broken: AtomicBool,
    permits: Permits,
    /// A clone of the socket used only to shut it down.
    control: TcpStream,
    writes: AtomicU64,
    commands_written: AtomicU64,
    /// The opt-in local cache, kept by this connection's tracking pushes (see
    /// [`crate::local_cache`]).
    cache: Option<LocalCache>,
}

impl Inner {
    fn closed_reason(&self) -> String {
        self.inflight
            .lock()
            .closed
            .clone()
            .unwrap_or_else(|| "connection closed".to_string())
    }

    /// Queues (or, batching off, writes) one entry. The permit is already held.
    fn submit(&self, entry: Entry) {
        if self.batching {
            self.queue.push(entry);
            self.try_flush();
        } else {
            let mut w = self.writer.lock();
            self.write_entries(&mut w, vec![entry]);
        }
    }

    /// Becomes the flusher if nobody is, and writes until the queue is empty, or until it has
    /// written `MAX_ROUNDS` batches for others: then it hands what is queued to the oldest
    /// waiting caller among it and returns to its own reply, so no caller stays the writer for
    /// everyone while load lasts (its own latency would grow without bound).
    fn try_flush(&self) {
        let mut batch = Vec::new();
        loop {
            if self
                .flushing
                .compare_exchange(false, true, Ordering::SeqCst, Ordering::Relaxed)
                .is_err()
            {
                return;
            }
            let mut handed_off = false;
            {
                let mut w = self.writer.lock();
                let mut rounds = 0;
                loop {
                    if self.handoff_pending.load(Ordering::SeqCst) {
                        let mut h = self.handoff.lock();
                        batch.append(&mut h);
                        self.handoff_pending.store(false, Ordering::SeqCst);
                    }
                    batch.extend(self.queue.take_all());
                    if batch.is_empty() {
                        break;
                    }
                    if rounds >= MAX_ROUNDS && self.hand_off(&mut batch) {
                        handed_off = true;
                        break;
                    }
                    self.write_entries(&mut w, std::mem::take(&mut batch));
                    rounds += 1;
                }
            }
            self.flushing.store(false, Ordering::SeqCst);
            if handed_off {
                // The successor runs try_flush when it wakes.
                return;
            }
            // Lost-wakeup check: a push that happened after our last take saw the flag set.
            if self.queue.is_empty() && !self.handoff_pending.load(Ordering::SeqCst) {
                return;
            }
        }
    }

    /// Runs the flusher role a hand-off gave this caller. The old flusher wakes its successor
    /// just before it releases the `flushing` flag, so the successor's first attempt can lose
    /// the race to it; giving up then would leave the handed-off batch parked with nobody to
    /// write it (and its abandoned entries holding permits). So keep trying, yielding, until
    /// someone has taken the batch: whoever holds the flag takes it at its next round.
    fn take_over_flush(&self) {
        loop {
            self.try_flush();
            if !self.handoff_pending.load(Ordering::SeqCst) {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// Makes sure queued commands get written before a caller waits for a permit: abandoned
    /// commands still queued hold permits until a flush skips them, and if every caller only
    /// waited for permits, nobody would ever flush them.
    fn flush_before_permit_wait(&self) {
        if !self.queue.is_empty() || self.handoff_pending.load(Ordering::SeqCst) {
            self.try_flush();
        }
    }

    /// Parks `batch` for a successor: wakes the oldest live caller in it. False (batch left
    /// untouched) when every entry was abandoned.
    ///
    /// The batch is parked and `handoff_pending` set *before* the successor is woken: a
    /// successor that woke first could try the flag (held by us), see nothing pending, go back
    /// to waiting for its reply, and leave the parked batch with nobody to write it.
    fn hand_off(&self, batch: &mut Vec<Entry>) -> bool {
        let mut h = self.handoff.lock();
        h.append(batch);
        self.handoff_pending.store(true, Ordering::SeqCst);
        if h.iter().any(|e| e.slot.hand_flush()) {
            return true;
        }
        batch.append(&mut h);
        self.handoff_pending.store(false, Ordering::SeqCst);
        false
    }

    /// Writes entries in order, in chunks capped by count and bytes, one write per chunk.
    fn write_entries(&self, w: &mut Writer, entries: Vec<Entry>) {
        let mut it = entries.into_iter().peekable();
        while it.peek().is_some() {
            w.buf.clear();
            w.slots.clear();
            while let Some(e) = it.peek() {
                if w.slots.len() >= self.max_batch_commands
                    || (!w.buf.is_empty() && w.buf.len() + e.bytes.len() > self.max_batch_bytes)
                {
                    break;
                }
                let e = it.next().expect("peeked");
                {
                    let mut st = e.slot.state.lock();
                    if st.abandoned {
                        drop(st);
                        self.permits.release();
                        continue;
                    }
                    st.sent = true;
                }
                w.buf.extend_from_slice(&e.bytes);
                w.slots.push(e.slot);
            }
            if w.slots.is_empty() {
                continue;
            }
            let n = w.slots.len() as u64;
            {
                let mut inf = self.inflight.lock();
                if let Some(reason) = &inf.closed {
                    let reason = reason.clone();
                    drop(inf);
                    for s in w.slots.drain(..) {
                        s.complete(Err(Error::ConnectionClosed(reason.clone())));
                        self.permits.release();
                    }
                    continue;
                }
                inf.slots.extend(w.slots.drain(..));
            }
            let Writer { stream, buf, .. } = w;
            match stream.write_all(buf) {
                Ok(()) => {
                    self.writes.fetch_add(1, Ordering::Relaxed);
                    self.commands_written.fetch_add(n, Ordering::Relaxed);
                }
                Err(e) => self.close(format!("write to {} failed: {e}", self.addr)),
            }
        }
    }

    /// Breaks the connection: fails everything queued or in flight with `reason`.
    fn close(&self, reason: String) {
        self.broken.store(true, Ordering::SeqCst);
        if let Some(c) = &self.cache {
            c.kill(); // its invalidations may be lost from here on
        }
        let drained: Vec<Arc<Slot>> = {
            let mut inf = self.inflight.lock();
            if inf.closed.is_none() {
                inf.closed = Some(reason);
            }
            inf.slots.drain(..).collect()
        };
        let reason = self.closed_reason();
        let _ = self.control.shutdown(Shutdown::Both);
        for s in drained {
            s.complete(Err(Error::ConnectionClosed(reason.clone())));
            self.permits.release();
        }
        let mut queued = std::mem::take(&mut *self.handoff.lock());
        queued.extend(self.queue.take_all());
        for e in queued {
            e.slot
                .complete(Err(Error::ConnectionClosed(reason.clone())));
            self.permits.release();
        }
    }

    /// The reader thread: parse replies, complete slots in FIFO order.
    fn read_loop(self: Arc<Self>, mut stream: TcpStream, mut buf: Vec<u8>) {
        let limits = Limits::default();
        let mut chunk = vec![0u8; 256 * 1024];
        let mut start = 0usize;
        let mut current: Option<(Arc<Slot>, Vec<Frame>)> = None;
        let reason = 'outer: loop {
            loop {
                match parse_frame(&buf[start..], &limits) {
                    Ok(Some((frame, used))) => {
                        start += used;
                        if let Frame::Push(push) = &frame {
                            if let Some(c) = &self.cache {
                                c.apply_push(push);
                            }
                            continue;
                        }
                        if current.is_none() {
                            match self.inflight.lock().slots.pop_front() {
                                Some(s) => {
                                    let n = s.expected;
                                    current = Some((s, Vec::with_capacity(n)));
                                }
                                None => {
                                    break 'outer format!(
                                        "{} sent a reply with no command pending",
                                        self.addr
                                    )
                                }
                            }
                        }
                        let (slot, frames) = current.as_mut().expect("set above");
                        frames.push(frame);
                        if frames.len() == slot.expected {
                            let (slot, frames) = current.take().expect("set above");
                            slot.complete(Ok(frames));
                            self.permits.release();
                        }
                    }
                    Ok(None) => break,
                    Err(e) => break 'outer format!("bad reply from {}: {e}", self.addr),
                }
            }
            if start == buf.len() {
                buf.clear();
                start = 0;
            } else if start > 0 && start >= buf.len() / 2 {
                buf.drain(..start);
                start = 0;
            }
            match stream.read(&mut chunk) {
                Ok(0) => break format!("{} closed the connection", self.addr),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if self.broken.load(Ordering::SeqCst) {
                        break self.closed_reason();
                    }
                    break format!("read from {} failed: {e}", self.addr);
                }
            }
        };
        if let Some((slot, _)) = current.take() {
            let why = format!("{reason} (in the middle of a reply)");
            slot.complete(Err(Error::ConnectionClosed(why)));
            self.permits.release();
        }
        self.close(reason);
    }
}

/// Closes the socket when the last user handle goes (the reader thread holds only `Inner`).
struct Handle {
    inner: Arc<Inner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.inner
            .close("connection dropped by its owner".to_string());
    }
}

/// Counters of a connection's writes, to see batching at work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// `write` calls made (one per batch).
    pub writes: u64,
    /// Commands (or pipelines) written.
    pub commands: u64,
}

/// One connection to one server, shareable by any number of threads (clone it, or share a
/// reference) and async tasks. See the module docs for how it batches.
#[derive(Clone)]
pub struct Connection {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.handle.inner.addr)
            .field("batching", &self.handle.inner.batching)
            .field("broken", &self.is_broken())
            .finish()
    }
}

/// Opens a TCP connection to `addr` (host:port) within `timeout`.
pub(crate) fn tcp_connect(addr: &str, timeout: Duration) -> Result<TcpStream> {
    let addrs = addr.to_socket_addrs().map_err(Error::Connect)?;
    let mut last = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(Error::Connect(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, format!("{addr}: no address"))
    })))
}

/// The commands sent right after connecting: HELLO/AUTH/SETNAME/SELECT.
pub(crate) fn handshake_cmds(opts: &ConnectOptions) -> Vec<Cmd> {
    let mut cmds = Vec::new();
    if opts.proto == Proto::Resp3 {
        let mut c = Cmd::new("HELLO").arg("3");
        if let Some(p) = &opts.password {
            c = c
                .arg("AUTH")
                .arg(opts.username.as_deref().unwrap_or("default"))
                .arg(p.as_str());
        }
        if let Some(n) = &opts.client_name {
            c = c.arg("SETNAME").arg(n.as_str());
        }
        cmds.push(c);
    } else {
        if let Some(p) = &opts.password {
            let mut c = Cmd::new("AUTH");
            if let Some(u) = &opts.username {
                c = c.arg(u.as_str());
            }
            cmds.push(c.arg(p.as_str()));
        }
        if let Some(n) = &opts.client_name {
            cmds.push(Cmd::new("CLIENT").arg("SETNAME").arg(n.as_str()));
        }
    }
    if opts.db != 0 {
        cmds.push(Cmd::new("SELECT").arg(opts.db));
    }
    if opts.local_cache > 0 {
        cmds.push(Cmd::new("CLIENT").arg("TRACKING").arg("ON"));
    }
    cmds
}

/// Sends the handshake synchronously; returns bytes read beyond its replies.
fn handshake(stream: &mut TcpStream, opts: &ConnectOptions) -> Result<Vec<u8>> {
    let cmds = handshake_cmds(opts);
    if cmds.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    cmds.iter().for_each(|c| c.encode(&mut out));
    let io = |e: std::io::Error| Error::ConnectionClosed(format!("handshake failed: {e}"));
    stream.write_all(&out).map_err(io)?;
    let limits = Limits::default();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let mut got = 0;
    let mut first_err = None;
    while got < cmds.len() {
        match parse_frame(&buf, &limits).map_err(Error::Protocol)? {
            Some((frame, used)) => {
                buf.drain(..used);
                if matches!(frame, Frame::Push(_)) {
                    continue;
                }
                if let Some(e) = error_text(&frame) {
                    first_err.get_or_insert(Error::Server(e));
                }
                got += 1;
            }
            None => {
                let n = stream.read(&mut chunk).map_err(io)?;
                if n == 0 {
                    return Err(Error::ConnectionClosed(
                        "server closed the connection during the handshake".into(),
                    ));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(buf),
    }
}

/// Before a command that may write is sent: drops each of its arguments from the local cache
/// as a possible key (FLUSHALL / FLUSHDB empty it).
fn forget_written(cache: &LocalCache, c: &Cmd) {
    if c.is_idempotent() {
        return; // a known read
    }
    let args = c.args();
    if args[0].eq_ignore_ascii_case(b"FLUSHALL") || args[0].eq_ignore_ascii_case(b"FLUSHDB") {
        cache.clear();
    } else {
        args[1..].iter().for_each(|a| cache.invalidate(a));
    }
}

/// The text of an error reply, if `f` is one.
pub(crate) fn error_text(f: &Frame) -> Option<String> {
    match f {
        Frame::Error(s) => Some(s.clone()),
        Frame::BlobError(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

/// Turns an error reply into `Err(Error::Server)`.
pub(crate) fn into_result(f: Frame) -> Result<Frame> {
    match error_text(&f) {
        Some(e) => Err(Error::Server(e)),
        None => Ok(f),
    }
}

impl Connection {
    /// Connects to `addr` ("host:port"), runs the handshake (HELLO 3 / AUTH / CLIENT SETNAME /
    /// SELECT as `opts` asks) and starts the reader thread.
    pub fn connect(addr: &str, opts: &ConnectOptions) -> Result<Connection> {
        let mut stream = tcp_connect(addr, opts.connect_timeout)?;
        let io = |e: std::io::Error| Error::Connect(e);
        stream
            .set_read_timeout(Some(opts.connect_timeout))
            .map_err(io)?;
        stream
            .set_write_timeout(Some(opts.connect_timeout))
            .map_err(io)?;
        let leftover = handshake(&mut stream, opts)?;
        stream.set_read_timeout(None).map_err(io)?;
        stream
            .set_write_timeout(Some(opts.write_timeout))
            .map_err(io)?;
        let reader = stream.try_clone().map_err(io)?;
        let control = stream.try_clone().map_err(io)?;
        let inner = Arc::new(Inner {
            addr: addr.to_string(),
            batching: opts.batching,
            max_batch_commands: opts.max_batch_commands.max(1),
            max_batch_bytes: opts.max_batch_bytes.max(1),
            allow_blocking: opts.allow_blocking,
            timeout: opts.timeout,
            proto: opts.proto,
            queue: TaskList::new(),
            flushing: AtomicBool::new(false),
            handoff: Mutex::new(Vec::new()),
            handoff_pending: AtomicBool::new(false),
            writer: Mutex::new(Writer {
                stream,
                buf: Vec::with_capacity(64 * 1024),
                slots: Vec::new(),
            }),
            inflight: Mutex::new(InFlight::default()),
            broken: AtomicBool::new(false),
            permits: Permits::new(opts.max_in_flight),
            control,
            writes: AtomicU64::new(0),
            commands_written: AtomicU64::new(0),
            cache: (opts.local_cache > 0).then(|| LocalCache::new(opts.local_cache)),
        });
        let r = inner.clone();
        std::thread::Builder::new()
            .name(format!("kvik-client-reader {addr}"))
            .spawn(move || r.read_loop(reader, leftover))
            .map_err(io)?;
        Ok(Connection {
            handle: Arc::new(Handle { inner }),
        })
    }

    /// The address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.handle.inner.addr
    }

    /// The protocol negotiated on connect.
    pub fn proto(&self) -> Proto {
        self.handle.inner.proto
    }

    /// True once the connection broke or was closed; every call then fails at once.
    pub fn is_broken(&self) -> bool {
        self.handle.inner.broken.load(Ordering::SeqCst)
    }

    /// Write counters (writes vs commands shows the batch size).
    pub fn stats(&self) -> ConnStats {
        let i = &self.handle.inner;
        ConnStats {
            writes: i.writes.load(Ordering::Relaxed),
            commands: i.commands_written.load(Ordering::Relaxed),
        }
    }

    /// Closes the connection: whatever is queued or in flight fails.
    pub fn close(&self) {
        self.handle
            .inner
            .close("connection closed by the client".to_string());
    }

    fn check_allowed(&self, c: &Cmd) -> Result<()> {
        if self.handle.inner.allow_blocking {
            return Ok(());
        }
        match c.shared_refusal() {
            Some(why) => Err(Error::Refused(why)),
            None => Ok(()),
        }
    }

    /// Sends raw request bytes that produce `expected` replies and waits for them, blocking
    /// the thread until `deadline`.
    fn call_raw(&self, bytes: Vec<u8>, expected: usize, deadline: Instant) -> Result<Vec<Frame>> {
        let inner = &self.handle.inner;
        if !inner.permits.try_acquire() {
            inner.flush_before_permit_wait();
            if !inner.permits.acquire(deadline) {
                return Err(Error::Timeout { sent: false });
            }
        }
        if inner.broken.load(Ordering::SeqCst) {
            inner.permits.release();
            return Err(Error::ConnectionClosed(inner.closed_reason()));
        }
        let slot = Slot::new(expected);
        inner.submit(Entry {
            bytes,
            slot: slot.clone(),
        });
        let mut st = slot.state.lock();
        loop {
            if st.must_flush {
                st.must_flush = false;
                parking_lot::MutexGuard::unlocked(&mut st, || inner.take_over_flush());
                continue;
            }
            if let Some(r) = st.outcome.take() {
                return r;
            }
            if slot.cv.wait_until(&mut st, deadline).timed_out() {
                if let Some(r) = st.outcome.take() {
                    return r;
                }
                st.abandoned = true;
                let sent = st.sent;
                if std::mem::take(&mut st.must_flush) {
                    drop(st);
                    inner.take_over_flush();
                }
                return Err(Error::Timeout { sent });
            }
        }
    }

    /// Runs one command with the default timeout. An error reply becomes [`Error::Server`].
    pub fn query(&self, c: &Cmd) -> Result<Frame> {
        self.query_timeout(c, self.handle.inner.timeout)
    }

    /// Runs one command with its own timeout (covering the permit wait, queueing, the write and
    /// the reply).
    pub fn query_timeout(&self, c: &Cmd, timeout: Duration) -> Result<Frame> {
        self.check_allowed(c)?;
        let fill = match self.cached_get(c) {
            Some(Ok(hit)) => return Ok(hit),
            Some(Err(token)) => Some(token),
            None => None,
        };
        let mut bytes = Vec::with_capacity(64);
        c.encode(&mut bytes);
        let mut frames = self.call_raw(bytes, 1, Instant::now() + timeout)?;
        let reply = into_result(frames.pop().expect("one reply"))?;
        if let (Some(token), Some(cache)) = (fill, &self.handle.inner.cache) {
            cache.fill(token, &c.args()[1], &reply);
        }
        Ok(reply)
    }

    /// With the local cache on: a GET answered from it (`Ok`), or the token to fill it with the
    /// reply (`Err`); `None` for any other command, whose possible keys are dropped from the
    /// cache first if it may write (see [`crate::local_cache`]).
    fn cached_get(&self, c: &Cmd) -> Option<std::result::Result<Frame, FillToken>> {
        let cache = self.handle.inner.cache.as_ref()?;
        let args = c.args();
        if args.len() == 2 && args[0].eq_ignore_ascii_case(b"GET") {
            return Some(
                cache
                    .get(&args[1])
                    .map(|v| v.map_or(Frame::Null, Frame::Bulk)),
            );
        }
        forget_written(cache, c);
        None
    }

    /// The local cache's counters, if it is on.
    pub fn local_cache_stats(&self) -> Option<LocalCacheStats> {
        self.handle.inner.cache.as_ref().map(LocalCache::stats)
    }

    /// Drops from the local cache what the commands of a pipeline or an async call may write.
    fn forget_written_by<'c>(&self, cmds: impl IntoIterator<Item = &'c Cmd>) {
        if let Some(cache) = &self.handle.inner.cache {
            cmds.into_iter().for_each(|c| forget_written(cache, c));
        }
    }

    /// Runs a pipeline: its commands are written contiguously and answered in order; each gets
    /// its own result. An atomic pipeline returns the items of the EXEC reply (or the error
    /// that aborted it, e.g. `EXECABORT`, as the only item).
    pub fn pipeline(&self, p: &Pipeline) -> Result<Vec<Result<Frame>>> {
        self.pipeline_timeout(p, self.handle.inner.timeout)
    }

    /// [`Connection::pipeline`] with its own timeout.
    pub fn pipeline_timeout(&self, p: &Pipeline, timeout: Duration) -> Result<Vec<Result<Frame>>> {
        if p.is_empty() {
            return Ok(Vec::new());
        }
        for c in p.cmds() {
            self.check_allowed(c)?;
        }
        self.forget_written_by(p.cmds());
        let (bytes, n) = p.encode();
        let frames = self.call_raw(bytes, n, Instant::now() + timeout)?;
        Ok(pipeline_results(p.is_atomic(), frames))
    }

    /// Starts one command asynchronously. The future needs no particular runtime; dropping it
    /// before it completes abandons the command (its reply is discarded when it comes).
    /// Combine it with your runtime's timeout (e.g. `tokio::time::timeout`) for a deadline.
    pub fn query_async(&self, c: &Cmd) -> ReplyFuture {
        if let Err(e) = self.check_allowed(c) {
            return ReplyFuture::failed(self.handle.clone(), e);
        }
        self.forget_written_by([c]);
        let mut bytes = Vec::with_capacity(64);
        c.encode(&mut bytes);
        ReplyFuture {
            handle: self.handle.clone(),
            stage: Stage::Start { bytes, expected: 1 },
            multi: None,
        }
    }

    /// Starts a pipeline asynchronously; the output is the same as [`Connection::pipeline`].
    pub fn pipeline_async(&self, p: &Pipeline) -> PipelineFuture {
        for c in p.cmds() {
            if let Err(e) = self.check_allowed(c) {
                return PipelineFuture {
                    inner: ReplyFuture::failed(self.handle.clone(), e),
                    empty: false,
                };
            }
        }
        self.forget_written_by(p.cmds());
        let (bytes, n) = p.encode();
        PipelineFuture {
            empty: p.is_empty(),
            inner: ReplyFuture {
                handle: self.handle.clone(),
                stage: Stage::Start {
                    bytes,
                    expected: n.max(1),
                },
                multi: Some(p.is_atomic()),
            },
        }
    }
}

/// Splits a pipeline's replies into per-command results.
fn pipeline_results(atomic: bool, mut frames: Vec<Frame>) -> Vec<Result<Frame>> {
    if !atomic {
        return frames.into_iter().map(into_result).collect();
    }
    match frames.pop() {
        Some(Frame::Array(items)) => items.into_iter().map(into_result).collect(),
        Some(other) => vec![into_result(other)
            .and_then(|f| Err(Error::UnexpectedReply(format!("EXEC replied {f:?}"))))],
        None => Vec::new(),
    }
}

enum Stage {
    Start { bytes: Vec<u8>, expected: usize },
    Waiting(Arc<Slot>),
    Failed(Error),
    Done,
}

/// The future of [`Connection::query_async`]: resolves to the reply (error replies become
/// [`Error::Server`]).
pub struct ReplyFuture {
    handle: Arc<Handle>,
    stage: Stage,
    /// `Some(atomic)` for a pipeline.
    multi: Option<bool>,
}

impl std::fmt::Debug for ReplyFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match self.stage {
            Stage::Start { .. } => "start",
            Stage::Waiting(_) => "waiting",
            Stage::Failed(_) => "failed",
            Stage::Done => "done",
        };
        f.debug_struct("ReplyFuture")
            .field("stage", &stage)
            .finish()
    }
}

impl ReplyFuture {
    fn failed(handle: Arc<Handle>, e: Error) -> ReplyFuture {
        ReplyFuture {
            handle,
            stage: Stage::Failed(e),
            multi: None,
        }
    }

    fn poll_frames(&mut self, cx: &mut Context<'_>) -> Poll<Result<Vec<Frame>>> {
        let inner = &self.handle.inner;
        loop {
            match &mut self.stage {
                Stage::Done => panic!("ReplyFuture polled after completion"),
                Stage::Failed(_) => {
                    let Stage::Failed(e) = std::mem::replace(&mut self.stage, Stage::Done) else {
                        unreachable!()
                    };
                    return Poll::Ready(Err(e));
                }
                Stage::Start { .. } => {
                    if !inner.permits.try_acquire() {
                        inner.flush_before_permit_wait();
                        inner.permits.register(cx.waker());
                        if !inner.permits.try_acquire() {
                            return Poll::Pending;
                        }
                    }
                    if inner.broken.load(Ordering::SeqCst) {
                        inner.permits.release();
                        self.stage = Stage::Done;
                        return Poll::Ready(Err(Error::ConnectionClosed(inner.closed_reason())));
                    }
                    let Stage::Start { bytes, expected } =
                        std::mem::replace(&mut self.stage, Stage::Done)
                    else {
                        unreachable!()
                    };
                    let slot = Slot::new(expected);
                    // Store the waker before submitting so a fast reply finds it.
                    slot.state.lock().waker = Some(cx.waker().clone());
                    self.stage = Stage::Waiting(slot.clone());
                    inner.submit(Entry { bytes, slot });
                }
                Stage::Waiting(slot) => {
                    let mut st = slot.state.lock();
                    if st.must_flush {
                        st.must_flush = false;
                        drop(st);
                        inner.take_over_flush();
                        continue;
                    }
                    if let Some(r) = st.outcome.take() {
                        drop(st);
                        self.stage = Stage::Done;
                        return Poll::Ready(r);
                    }
                    match &st.waker {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => st.waker = Some(cx.waker().clone()),
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

impl Future for ReplyFuture {
    type Output = Result<Frame>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        this.poll_frames(cx)
            .map(|r| r.and_then(|mut frames| into_result(frames.pop().expect("one reply"))))
    }
}

impl Drop for ReplyFuture {
    fn drop(&mut self) {
        if let Stage::Waiting(slot) = &self.stage {
            let mut st = slot.state.lock();
            if st.outcome.is_none() {
                st.abandoned = true;
            }
            st.waker = None;
            if std::mem::take(&mut st.must_flush) {
                drop(st);
                self.handle.inner.take_over_flush();
            }
        }
    }
}

/// The future of [`Connection::pipeline_async`].
#[derive(Debug)]
pub struct PipelineFuture {
    inner: ReplyFuture,
    /// An empty pipeline resolves at once without touching the connection.
    empty: bool,
}

impl Future for PipelineFuture {
    type Output = Result<Vec<Result<Frame>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if this.empty {
            this.inner.stage = Stage::Done;
            return Poll::Ready(Ok(Vec::new()));
        }
        let atomic = this.inner.multi.unwrap_or(false);
        this.inner
            .poll_frames(cx)
            .map(|r| r.map(|frames| pipeline_results(atomic, frames)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::task::Wake;

    /// A successor's waker that records, at the moment it is woken, whether the batch handed
    /// to it is already parked where its `take_over_flush` looks.
    struct Probe {
        inner: Arc<Inner>,
        saw: Mutex<Option<bool>>,
    }

    impl Wake for Probe {
        fn wake(self: Arc<Self>) {
            *self.saw.lock() = Some(self.inner.handoff_pending.load(Ordering::SeqCst));
        }
    }

    /// A connection to a listener that never answers: enough to drive the queue by hand.
    fn idle_connection() -> (TcpListener, Connection) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let conn = Connection::connect(&addr, &ConnectOptions::new()).unwrap();
        (listener, conn)
    }

    fn entry(slot: &Arc<Slot>) -> Entry {
        Entry {
            bytes: b"*1\r\n$4\r\nPING\r\n".to_vec(),
            slot: slot.clone(),
        }
    }

    /// The race CI once hit: the successor woke, found nothing pending (the flag still held by
    /// the old flusher), went back to waiting, and the batch parked after it stayed unwritten.
    /// So the batch must be visible (`handoff_pending`, what a woken successor checks) before
    /// the wake-up.
    #[test]
    fn a_successor_is_woken_only_after_its_batch_is_parked() {
        let (_listener, conn) = idle_connection();
        let inner = conn.handle.inner.clone();
        let slot = Slot::new(1);
        let probe = Arc::new(Probe {
            inner: inner.clone(),
            saw: Mutex::new(None),
        });
        slot.state.lock().waker = Some(Waker::from(probe.clone()));
        let mut batch = vec![entry(&slot)];
        assert!(inner.hand_off(&mut batch));
        assert!(batch.is_empty(), "the batch is parked, not kept");
        let pending = probe.saw.lock().expect("the successor was woken");
        assert!(pending, "woken before the hand-off was visible");
        assert!(slot.state.lock().must_flush);
        assert_eq!(inner.handoff.lock().len(), 1);
        inner.handoff.lock().clear();
        inner.handoff_pending.store(false, Ordering::SeqCst);
    }

    /// Nobody left to hand to: the batch comes back whole and nothing is marked pending.
    #[test]
    fn a_batch_of_abandoned_callers_is_not_parked() {
        let (_listener, conn) = idle_connection();
        let inner = conn.handle.inner.clone();
        let slots: Vec<_> = (0..3).map(|_| Slot::new(1)).collect();
        for s in &slots {
            s.state.lock().abandoned = true;
        }
        let mut batch: Vec<_> = slots.iter().map(entry).collect();
        assert!(!inner.hand_off(&mut batch));
        assert_eq!(batch.len(), 3);
        assert!(!inner.handoff_pending.load(Ordering::SeqCst));
        assert!(inner.handoff.lock().is_empty());
    }
}
