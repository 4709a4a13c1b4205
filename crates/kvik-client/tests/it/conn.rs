//! The auto-batch connection and the reconnecting client.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use kvik_client::{
    cmd, Client, Commands, ConnectOptions, Connection, Error, Frame, Pipeline, Proto,
};

use crate::common::{block_on, Fake, FakeServer, Server};

fn opts() -> ConnectOptions {
    ConnectOptions::new().timeout(Duration::from_secs(20))
}

fn strings_roundtrip(c: &impl Commands) {
    c.set("s:a", "1").unwrap();
    assert_eq!(c.get("s:a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(c.get("s:none").unwrap(), None);
    assert_eq!(c.incr_by("s:a", 41).unwrap(), 42);
    assert_eq!(c.append("s:b", "xy").unwrap(), 2);
    assert_eq!(c.strlen("s:b").unwrap(), 2);
    assert!(c.set_nx("s:c", "v").unwrap());
    assert!(!c.set_nx("s:c", "w").unwrap());
    c.mset(&[("m:1", "a"), ("m:2", "b")]).unwrap();
    assert_eq!(
        c.mget(&["m:1", "m:none", "m:2"]).unwrap(),
        vec![Some(b"a".to_vec()), None, Some(b"b".to_vec())]
    );
    assert_eq!(c.exists(&["m:1", "m:2", "m:none"]).unwrap(), 2);
    assert_eq!(c.ttl("m:1").unwrap(), Some(None));
    assert_eq!(c.ttl("m:none").unwrap(), None);
    assert!(c.expire("m:1", Duration::from_secs(100)).unwrap());
    assert!(matches!(c.ttl("m:1").unwrap(), Some(Some(d)) if d <= Duration::from_secs(100)));
    assert!(c.persist("m:1").unwrap());
    c.set_ex("m:ex", "v", Duration::from_secs(50)).unwrap();
    assert_eq!(c.key_type("m:ex").unwrap(), "string");
    c.rename("m:ex", "m:ex2").unwrap();
    assert_eq!(c.get_del("m:ex2").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(c.del(&["m:1", "m:2", "m:none"]).unwrap(), 2);
    let (_, keys) = c.scan(0, Some("s:*"), 1000).unwrap();
    assert!(!keys.is_empty());
    c.ping().unwrap();
    // Error replies carry the server's text.
    match c.incr_by("s:b", 1) {
        Err(Error::Server(msg)) => assert!(msg.starts_with("ERR"), "{msg}"),
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[test]
fn typed_helpers_against_kvik_and_redis() {
    for server in [Server::kvik(&[]), Server::redis(&[])] {
        for proto in [Proto::Resp2, Proto::Resp3] {
            let c = Client::connect(&server.addr(), opts().proto(proto)).unwrap();
            c.query(&cmd("FLUSHALL")).unwrap();
            strings_roundtrip(&c);
        }
    }
}

#[test]
fn hashes_against_redis() {
    let server = Server::redis(&[]);
    for proto in [Proto::Resp2, Proto::Resp3] {
        let c = Client::connect(&server.addr(), opts().proto(proto)).unwrap();
        c.del(&["h"]).unwrap();
        assert_eq!(c.hset("h", &[("f1", "a"), ("f2", "b")]).unwrap(), 2);
        assert_eq!(c.hget("h", "f1").unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(c.hget("h", "nope").unwrap(), None);
        assert_eq!(
            c.hmget("h", &["f2", "x"]).unwrap(),
            vec![Some(b"b".to_vec()), None]
        );
        let mut all = c.hgetall("h").unwrap();
        all.sort();
        assert_eq!(
            all,
            vec![
                (b"f1".to_vec(), b"a".to_vec()),
                (b"f2".to_vec(), b"b".to_vec())
            ]
        );
        assert!(c.hexists("h", "f1").unwrap());
        assert_eq!(c.hlen("h").unwrap(), 2);
        assert_eq!(c.hincr_by("h", "n", 5).unwrap(), 5);
        assert_eq!(c.hdel("h", &["f1", "zz"]).unwrap(), 1);
        match c.get("h") {
            Err(Error::Server(msg)) => assert!(msg.starts_with("WRONGTYPE"), "{msg}"),
            other => panic!("expected WRONGTYPE, got {other:?}"),
        }
    }
}

#[test]
fn handshake_auth_select_and_name() {
    for server in [
        Server::kvik(&["--requirepass", "sekret"]),
        Server::redis(&["--requirepass", "sekret"]),
    ] {
        for proto in [Proto::Resp2, Proto::Resp3] {
            let o = opts()
                .proto(proto)
                .auth(None, "sekret")
                .db(3)
                .client_name("kvik-test");
            let c = Client::connect(&server.addr(), o).unwrap();
            c.set("in-db-3", "x").unwrap();
            let name = c.query(&cmd("CLIENT").arg("GETNAME")).unwrap();
            assert_eq!(name, Frame::Bulk(b"kvik-test".to_vec()));
            let hello = c.query(&cmd("PING")).unwrap();
            assert!(matches!(hello, Frame::Simple(ref s) if s == "PONG"));
            let db0 = Client::connect(&server.addr(), opts().auth(None, "sekret")).unwrap();
            assert_eq!(db0.get("in-db-3").unwrap(), None);
        }
        // Wrong password: the connect fails with the server's error.
        match Client::connect(&server.addr(), opts().auth(None, "wrong")) {
            Err(Error::Server(msg)) => assert!(
                msg.contains("WRONGPASS") || msg.contains("invalid"),
                "{msg}"
            ),
            other => panic!("expected an auth error, got {other:?}"),
        }
    }
}

/// Many threads on one connection: every reply goes to its own caller.
#[test]
fn concurrent_callers_each_get_their_own_reply() {
    for server in [Server::kvik(&[]), Server::redis(&[])] {
        for batching in [true, false] {
            let c = Arc::new(Client::connect(&server.addr(), opts().batching(batching)).unwrap());
            let threads: Vec<_> = (0..32)
                .map(|t| {
                    let c = c.clone();
                    std::thread::spawn(move || {
                        for i in 0..300 {
                            let k = format!("t{t}:k{i}");
                            let v = format!("value-{t}-{i}");
                            c.set(&k, &v).unwrap();
                            assert_eq!(c.get(&k).unwrap().unwrap(), v.as_bytes());
                        }
                    })
                })
                .collect();
            threads.into_iter().for_each(|t| t.join().unwrap());
            let stats = c.connection().unwrap().stats();
            assert_eq!(stats.commands, 32 * 300 * 2);
            if !batching {
                assert_eq!(stats.writes, stats.commands, "batching off: one write each");
            }
            assert!(stats.writes <= stats.commands);
        }
    }
}

/// With one caller there is never anything to batch with: each command is written at once.
#[test]
fn a_lone_caller_is_never_delayed_or_batched() {
    let server = Server::redis(&[]);
    let c = Connection::connect(&server.addr(), &opts()).unwrap();
    for i in 0..200 {
        c.query(&cmd("SET").arg("lone").arg(i)).unwrap();
    }
    let st = c.stats();
    assert_eq!((st.writes, st.commands), (200, 200));
}

/// A caller that times out (waiting for a permit, or for its reply) never gets another
/// caller's reply, and its late reply is not handed to the next caller.
#[test]
fn timeouts_never_shift_replies() {
    let server = Server::redis(&["--enable-debug-command", "yes"]);
    let c = Arc::new(Connection::connect(&server.addr(), &opts().max_in_flight(1)).unwrap());
    c.query(&cmd("SET").arg("k").arg("the-value")).unwrap();
    // A: a slow command that times out after it was sent.
    let slow = {
        let c = c.clone();
        std::thread::spawn(move || {
            c.query_timeout(
                &cmd("DEBUG").arg("SLEEP").arg("0.5"),
                Duration::from_millis(50),
            )
        })
    };
    // B: waits for the only in-flight permit, which A's command holds until its reply.
    std::thread::sleep(Duration::from_millis(20));
    let queued = c.query_timeout(&cmd("GET").arg("k"), Duration::from_millis(100));
    match slow.join().unwrap() {
        Err(Error::Timeout { sent: true }) => {}
        other => panic!("slow command: expected Timeout {{ sent: true }}, got {other:?}"),
    }
    match queued {
        Err(Error::Timeout { sent: false }) => {}
        Ok(Frame::Bulk(v)) => assert_eq!(v, b"the-value"),
        other => panic!("queued GET: expected a timeout before sending, got {other:?}"),
    }
    // C: the next caller gets its own reply, not DEBUG SLEEP's "+OK".
    let next = c.query(&cmd("GET").arg("k")).unwrap();
    assert_eq!(next, Frame::Bulk(b"the-value".to_vec()));
    assert!(!c.is_broken());
}

/// Under load, callers with tiny timeouts either get their own value or a timeout, never a
/// neighbour's reply; the connection stays usable.
#[test]
fn callers_timing_out_under_load_never_get_wrong_replies() {
    for server in [Server::kvik(&[]), Server::redis(&[])] {
        let c = Arc::new(Connection::connect(&server.addr(), &opts()).unwrap());
        for i in 0..64 {
            c.query(&cmd("SET").arg(format!("load:{i}")).arg(format!("v{i}")))
                .unwrap();
        }
        let timeouts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let threads: Vec<_> = (0..64)
            .map(|t| {
                let c = c.clone();
                let timeouts = timeouts.clone();
                std::thread::spawn(move || {
                    for i in 0..400u64 {
                        let micros = (i * 7 + t as u64 * 13) % 300;
                        let r = c.query_timeout(
                            &cmd("GET").arg(format!("load:{t}")),
                            Duration::from_micros(micros),
                        );
                        match r {
                            Ok(Frame::Bulk(v)) => assert_eq!(v, format!("v{t}").as_bytes()),
                            Err(Error::Timeout { .. }) => {
                                timeouts.fetch_add(1, Ordering::Relaxed);
                            }
                            other => panic!("unexpected {other:?}"),
                        }
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        eprintln!("timeouts under load: {}", timeouts.load(Ordering::Relaxed));
        for i in 0..64 {
            let r = c.query(&cmd("GET").arg(format!("load:{i}"))).unwrap();
            assert_eq!(r, Frame::Bulk(format!("v{i}").into_bytes()));
        }
        assert!(!c.is_broken());
    }
}

/// Values and pipelines far bigger than the socket buffers: the reader drains replies while
/// the flusher writes, so nothing deadlocks.
#[test]
fn big_values_and_big_pipelines_do_not_deadlock() {
    for server in [Server::kvik(&[]), Server::redis(&[])] {
        let c = Connection::connect(&server.addr(), &opts()).unwrap();
        let big: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        c.query(&cmd("SET").arg("big").arg(&big)).unwrap();
        assert_eq!(c.query(&cmd("GET").arg("big")).unwrap(), Frame::Bulk(big));
        let mut p = Pipeline::new();
        for i in 0..50_000 {
            p.push(cmd("SET").arg(format!("p:{i}")).arg(format!("{i:0>64}")));
        }
        let r = c.pipeline(&p).unwrap();
        assert_eq!(r.len(), 50_000);
        assert!(r
            .iter()
            .all(|x| matches!(x, Ok(Frame::Simple(s)) if s == "OK")));
        let mut g = Pipeline::new();
        for i in 0..50_000 {
            g.push(cmd("GET").arg(format!("p:{i}")));
        }
        let r = c.pipeline(&g).unwrap();
        for (i, x) in r.into_iter().enumerate() {
            assert_eq!(x.unwrap(), Frame::Bulk(format!("{i:0>64}").into_bytes()));
        }
    }
}

#[test]
fn pipelines_isolate_errors_and_atomic_pipelines_are_safe_to_share() {
    let server = Server::redis(&[]);
    let c = Connection::connect(&server.addr(), &opts()).unwrap();
    let r = c
        .pipeline(
            &Pipeline::new()
                .with(cmd("SET").arg("pi").arg("x"))
                .with(cmd("INCR").arg("pi"))
                .with(cmd("GET").arg("pi")),
        )
        .unwrap();
    assert!(matches!(&r[0], Ok(Frame::Simple(s)) if s == "OK"));
    assert!(matches!(&r[1], Err(Error::Server(m)) if m.starts_with("ERR")));
    assert_eq!(r[2].as_ref().unwrap(), &Frame::Bulk(b"x".to_vec()));
    let r = c
        .pipeline(
            &Pipeline::new()
                .atomic()
                .with(cmd("INCR").arg("counter"))
                .with(cmd("INCR").arg("counter")),
        )
        .unwrap();
    assert_eq!(
        r.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        vec![Frame::Integer(1), Frame::Integer(2)]
    );
    // Blocking and state-changing commands are refused on a shared connection...
    for bad in [
        cmd("BLPOP").arg("q").arg(0),
        cmd("MULTI"),
        cmd("SELECT").arg(1),
        cmd("SUBSCRIBE").arg("ch"),
    ] {
        assert!(matches!(c.query(&bad), Err(Error::Refused(_))), "{bad:?}");
    }
    // ...and allowed on a dedicated one.
    let d = Connection::connect(
        &server.addr(),
        &ConnectOptions {
            allow_blocking: true,
            ..opts()
        },
    )
    .unwrap();
    c.query(&cmd("RPUSH").arg("q").arg("item")).unwrap();
    let popped = d.query(&cmd("BLPOP").arg("q").arg(1)).unwrap();
    assert_eq!(
        popped,
        Frame::Array(vec![
            Frame::Bulk(b"q".to_vec()),
            Frame::Bulk(b"item".to_vec())
        ])
    );
}

/// A server that accepts and never answers: calls time out (not hang), queued ones are never
/// sent; then the server goes away and everything in flight fails with a clear error.
#[test]
fn silent_server_times_out_then_closing_fails_everything_in_flight() {
    let fake = FakeServer::start(Fake::Silent);
    let c = Arc::new(Connection::connect(&fake.addr(), &opts()).unwrap());
    match c.query_timeout(&cmd("GET").arg("k"), Duration::from_millis(100)) {
        Err(Error::Timeout { sent: true }) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    let waiters: Vec<_> = (0..16)
        .map(|i| {
            let c = c.clone();
            std::thread::spawn(move || c.query(&cmd("GET").arg(format!("k{i}"))))
        })
        .collect();
    // Let them all get in flight, then kill the server's side.
    let start = std::time::Instant::now();
    while fake.requests.load(Ordering::SeqCst) == 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    drop(fake);
    for w in waiters {
        match w.join().unwrap() {
            Err(Error::ConnectionClosed(why)) => assert!(why.contains("closed"), "{why}"),
            other => panic!("expected ConnectionClosed, got {other:?}"),
        }
    }
    assert!(c.is_broken());
    assert!(matches!(
        c.query(&cmd("PING")),
        Err(Error::ConnectionClosed(_))
    ));
}

/// Nothing is replayed after a break unless the caller asked for retries of an idempotent
/// command.
#[test]
fn no_replay_unless_idempotent_retries_were_asked_for() {
    let fake = FakeServer::start(Fake::CloseAfterRequest);
    let c = Client::connect(&fake.addr(), opts().retries(2)).unwrap();
    assert!(matches!(
        c.query(&cmd("INCR").arg("n")),
        Err(Error::ConnectionClosed(_))
    ));
    assert_eq!(
        fake.requests.load(Ordering::SeqCst),
        1,
        "INCR must not be replayed"
    );
    // GET is idempotent: tried once plus two retries, each on a fresh connection.
    assert!(c.get("k").is_err());
    assert_eq!(fake.requests.load(Ordering::SeqCst), 4);
    let no_retry = Client::connect(&fake.addr(), opts()).unwrap();
    assert!(no_retry.get("k").is_err());
    assert_eq!(fake.requests.load(Ordering::SeqCst), 5);
}

/// The client reconnects after the server closed its connection.
#[test]
fn client_reconnects_after_a_break() {
    for server in [Server::kvik(&[]), Server::redis(&[])] {
        let c = Client::connect(&server.addr(), opts().client_name("victim")).unwrap();
        c.set("r", "1").unwrap();
        let killer = Client::connect(&server.addr(), opts()).unwrap();
        let victim = client_addr(&c);
        // Hold the current connection: after the kill, `c.connection()` would open a new one.
        let conn = c.connection().unwrap();
        let killed = killer
            .query(&cmd("CLIENT").arg("KILL").arg("ADDR").arg(&victim))
            .unwrap();
        assert_eq!(killed, Frame::Integer(1));
        let start = std::time::Instant::now();
        while !conn.is_broken() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            conn.is_broken(),
            "{}: killed connection not seen as broken",
            server.addr()
        );
        assert_eq!(c.get("r").unwrap().as_deref(), Some(&b"1"[..]));
    }
}

fn client_addr(c: &Client) -> String {
    let Frame::Bulk(list) = c.query(&cmd("CLIENT").arg("LIST")).unwrap() else {
        panic!("CLIENT LIST")
    };
    let text = String::from_utf8(list).unwrap();
    let line = text.lines().find(|l| l.contains("name=victim")).unwrap();
    line.split(' ')
        .find_map(|f| f.strip_prefix("addr="))
        .unwrap()
        .to_string()
}

/// The async API works on any executor (here a 20-line one and tokio), over the same
/// connection the blocking callers use; dropping a future abandons its command.
#[test]
fn async_api_on_any_executor() {
    let server = Server::redis(&["--enable-debug-command", "yes"]);
    let c = Arc::new(Client::connect(&server.addr(), opts()).unwrap());
    block_on(async {
        c.set_async("a1", "v1").await.unwrap();
        assert_eq!(
            c.get_async("a1").await.unwrap().as_deref(),
            Some(&b"v1"[..])
        );
        let r = c
            .pipeline_async(
                &Pipeline::new()
                    .with(cmd("INCR").arg("n"))
                    .with(cmd("GET").arg("a1")),
            )
            .unwrap()
            .await
            .unwrap();
        assert_eq!(r.len(), 2);
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut tasks = Vec::new();
        for t in 0..100 {
            let c = c.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..20 {
                    let k = format!("at{t}:{i}");
                    c.set_async(&k, &k).await.unwrap();
                    assert_eq!(c.get_async(&k).await.unwrap().unwrap(), k.as_bytes());
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        // A timed-out (dropped) future's late reply is discarded.
        let slow = c
            .query_async(&cmd("DEBUG").arg("SLEEP").arg("0.3"))
            .unwrap();
        assert!(tokio::time::timeout(Duration::from_millis(30), slow)
            .await
            .is_err());
        assert_eq!(
            c.get_async("a1").await.unwrap().as_deref(),
            Some(&b"v1"[..])
        );
    });
    // Blocking callers share the same connection meanwhile.
    assert_eq!(c.get("a1").unwrap().as_deref(), Some(&b"v1"[..]));
}
