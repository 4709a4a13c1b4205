//! Test harness: real kvik-server and redis-server processes on ephemeral ports (kvik-testkit),
//! and fake servers that misbehave on purpose.

#![allow(dead_code)]

use std::future::Future;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

pub use kvik_testkit::{free_port, Endpoint, KvikServer, RedisServer};

pub use kvik_testkit::kvik_server_bin;

/// A running kvik-server or redis-server process (kvik-testkit's handles), killed on drop.
pub enum Server {
    Kvik(KvikServer),
    Redis(RedisServer),
}

impl Server {
    /// kvik-server on a fresh data directory.
    pub fn kvik(extra: &[&str]) -> Server {
        Server::Kvik(KvikServer::start(kvik_server_bin(), extra))
    }

    /// redis-server with persistence off.
    pub fn redis(extra: &[&str]) -> Server {
        Server::Redis(RedisServer::start(extra))
    }

    pub fn addr(&self) -> String {
        match self {
            Server::Kvik(s) => s.addr(),
            Server::Redis(s) => s.addr(),
        }
    }
}

/// How a fake server misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fake {
    /// Accepts and reads, never answers.
    Silent,
    /// Reads one request, then closes.
    CloseAfterRequest,
    /// Reads one request, writes the start of a reply, then closes.
    PartialReplyThenClose,
}

/// A misbehaving server on an ephemeral port; stops on drop.
pub struct FakeServer {
    pub port: u16,
    pub accepted: Arc<AtomicUsize>,
    pub requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl FakeServer {
    pub fn start(kind: Fake) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let conns = Arc::new(Mutex::new(Vec::new()));
        let (st, ac, rq, cs) = (
            stop.clone(),
            accepted.clone(),
            requests.clone(),
            conns.clone(),
        );
        std::thread::spawn(move || {
            while !st.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(false).unwrap();
                        ac.fetch_add(1, Ordering::SeqCst);
                        cs.lock().unwrap().push(s.try_clone().unwrap());
                        let rq = rq.clone();
                        std::thread::spawn(move || serve(s, kind, rq));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        FakeServer {
            port,
            accepted,
            requests,
            stop,
            conns,
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

fn serve(mut s: TcpStream, kind: Fake, requests: Arc<AtomicUsize>) {
    let mut buf = [0u8; 64 * 1024];
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                requests.fetch_add(1, Ordering::SeqCst);
                match kind {
                    Fake::Silent => {}
                    Fake::CloseAfterRequest => {
                        let _ = s.shutdown(Shutdown::Both);
                        return;
                    }
                    Fake::PartialReplyThenClose => {
                        let _ = s.write_all(b"*3\r\n$5\r\nvalue\r\n$5\r\nva");
                        std::thread::sleep(Duration::from_millis(20));
                        let _ = s.shutdown(Shutdown::Both);
                        return;
                    }
                }
            }
        }
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// A minimal executor for runtime-independence tests.
pub fn block_on<F: Future>(f: F) -> F::Output {
    struct ThreadWaker(std::thread::Thread);
    impl Wake for ThreadWaker {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        assert!(Instant::now() < deadline, "future did not complete in 30 s");
        std::thread::park_timeout(Duration::from_millis(100));
    }
}
