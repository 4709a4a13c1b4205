//! Heap allocations and time per command on the I/O thread's hit path (issue 15): parsing a
//! pipelined run of requests out of the query buffer (`net::parse_requests`, what each
//! connection does), then answering each on the I/O thread (`cmd::execute_cached`) into the
//! reply buffer. A counting global allocator counts every `alloc`/`realloc` of one thread; the
//! counts per command are printed before criterion times the same loops.
//!
//!   cargo bench --profile release -p kvik-server --bench hit_path
//!
//! (`--profile release`: the tests' artifacts, so RocksDB's C++ is not compiled again.)
//!
//! Commands: GET of a cached string, HGET of a cached small hash, SET of a cached key (a
//! run-to-completion write: memtable insert, WAL buffer append, made durable per run as the
//! I/O thread does at the end of its turn), each in runs of 16 as a pipelining client sends;
//! and SET again as the I/O thread runs writes by default (`rtc-write-batch`): buffered into
//! the turn's transaction, its keys' locks kept, the run written as one batch at its end.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kvik_server::clients::ClientInfo;
use kvik_server::cmd::ctx::Mode;
use kvik_server::cmd::{execute, execute_cached, table, Outcome};
use kvik_server::config::Config;
use kvik_server::net::SpareArgs;
use kvik_server::reply::Reply;
use kvik_server::server::Server;
use kvik_server::session::Session;
use kvik_server::storage::Storage;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

/// Counts the allocations of the thread that switched counting on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note_alloc() {
    // try_with: the allocator runs during thread teardown too.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counting touches
// only const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` made on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    ALLOCS.with(Cell::get)
}

const RUN: usize = 16;

struct Fixture {
    server: Arc<Server>,
    session: Session,
    limits: kvik_resp::Limits,
    /// One connection's parsing state, kept across runs as its I/O thread keeps it.
    rbuf: BytesMut,
    parser: kvik_resp::RequestParser,
    spare: SpareArgs,
    out: Reply,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        *config.dir.write() = dir.path().to_path_buf();
        let storage = Storage::open_tuned(
            dir.path(),
            kvik_server::cache::Cache::new(config.cache_settings()),
            &config.storage_tuning(),
        )
        .unwrap();
        let server = Arc::new(Server::new(config, storage, table().names()));
        server.set_self();
        server.apply_group_commit();
        let session = Session::new(ClientInfo::detached(1, 2), true);
        let limits = kvik_resp::Limits::default();
        let mut f = Fixture {
            server,
            session,
            limits,
            rbuf: BytesMut::with_capacity(16 << 10),
            parser: kvik_resp::RequestParser::new(),
            spare: SpareArgs::default(),
            out: Reply::new(kvik_resp::Proto::Resp2),
            _dir: dir,
        };
        // The keys the runs read, cached by their writes (cache-write-allocate).
        f.serve(&request_run(&[b"SET", b"key", b"value-of-twenty-bytes"], 1));
        f.serve(&request_run(
            &[b"HSET", b"hash", b"f1", b"v1", b"f2", b"v2"],
            1,
        ));
        f.on_worker(&[b"HGETALL", b"hash"]); // a worker's read fills the cached hash
        f
    }

    /// Runs one command as a worker would (setup only).
    fn on_worker(&mut self, args: &[&[u8]]) {
        let args: Vec<bytes::Bytes> = args
            .iter()
            .map(|a| bytes::Bytes::copy_from_slice(a))
            .collect();
        let mut out = Reply::new(kvik_resp::Proto::Resp2);
        let _ = execute(
            &self.server,
            &mut self.session,
            &mut out,
            &args,
            Mode::Normal,
            std::time::Duration::ZERO,
        );
        self.server.storage.make_durable().unwrap();
    }

    /// [`Fixture::serve`] inside one transaction, as an I/O thread's turn runs its writes
    /// (`net::io_thread::TurnWrites`).
    fn serve_turn(&mut self, input: &[u8]) -> usize {
        kvik_server::storage::locks::retain(true);
        let server = self.server.clone();
        let txn = server.storage.begin_txn();
        let len = self.serve_run(input);
        txn.commit().unwrap();
        self.server.storage.release_retained_locks();
        kvik_server::storage::locks::retain(false);
        self.server.storage.make_durable().unwrap();
        len
    }

    /// Takes `input` into the connection's query buffer and answers every request on this
    /// thread, as the I/O thread does with a run of cache hits; returns the reply's length.
    fn serve(&mut self, input: &[u8]) -> usize {
        let len = self.serve_run(input);
        self.server.storage.make_durable().unwrap();
        len
    }

    /// Parses `input` and answers each request of it (nothing made durable).
    fn serve_run(&mut self, input: &[u8]) -> usize {
        self.rbuf.extend_from_slice(input);
        let mut error = None;
        let run = kvik_server::net::parse_requests(
            &mut self.parser,
            &mut self.rbuf,
            &self.limits,
            usize::MAX,
            &mut error,
            &mut self.spare,
        );
        self.out.buf.clear();
        for args in &run {
            let outcome = execute_cached(&self.server, &mut self.session, &mut self.out, args);
            assert_eq!(outcome, Outcome::Done, "{:?} not answered here", args[0]);
        }
        self.spare.give_run(run);
        self.out.buf.len()
    }
}

/// `n` copies of the request `args`, RESP-encoded back to back.
fn request_run(args: &[&[u8]], n: usize) -> Vec<u8> {
    let mut one = Vec::new();
    kvik_resp::encode::command(&mut one, args);
    one.repeat(n)
}

/// How a case's runs are served: each command on its own, or a run in one transaction.
#[derive(Clone, Copy)]
enum Serve {
    Each,
    Turn,
}

const SET: &[&[u8]] = &[b"SET", b"key", b"value-of-twenty-bytes"];

const CASES: [(&str, &[&[u8]], Serve); 6] = [
    ("GET hit", &[b"GET", b"key"], Serve::Each),
    ("HGET cached hash", &[b"HGET", b"hash", b"f2"], Serve::Each),
    ("SET cached key", SET, Serve::Each),
    ("SET in a turn", SET, Serve::Turn),
    ("INCR in a turn", &[b"INCR", b"counter"], Serve::Turn),
    (
        "HSET in a turn",
        &[b"HSET", b"hash", b"f2", b"v3"],
        Serve::Turn,
    ),
];

impl Fixture {
    fn serve_as(&mut self, how: Serve, input: &[u8]) -> usize {
        match how {
            Serve::Each => self.serve(input),
            Serve::Turn => self.serve_turn(input),
        }
    }
}

fn hit_path(c: &mut Criterion) {
    let mut f = Fixture::new();
    println!("heap allocations per command, runs of {RUN} (parse + answer + reply):");
    for (name, args, how) in CASES {
        let input = request_run(args, RUN);
        for _ in 0..4 {
            f.serve_as(how, &input); // warm: buffers at size
        }
        let n = allocations(|| {
            f.serve_as(how, &input);
        });
        println!("  {name:<18} {:.2}", n as f64 / RUN as f64);
    }
    let mut g = c.benchmark_group("hit_path");
    g.throughput(Throughput::Elements(RUN as u64));
    for (name, args, how) in CASES {
        let input = request_run(args, RUN);
        g.bench_function(name, |b| b.iter(|| f.serve_as(how, &input)));
    }
    g.finish();
}

criterion_group!(benches, hit_path);
criterion_main!(benches);
