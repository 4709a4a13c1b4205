//! Client-side caching (CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO) and the other client
//! controls of issue 18 (PAUSE, REPLY, CLIENT LIST flags): a multi-connection scenario compared
//! with a real redis-server frame by frame, redis-py's own RESP3 client-side cache against kvik,
//! and behaviour tests for what a transcript cannot show (pauses, silenced replies).

use super::common::*;
use kvik_resp::{parse_frame, Frame, Limits};
use kvik_testkit::{connect_raw, resp_request, RedisServer};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One raw connection that keeps the pushes it receives along with the replies.
struct Peer {
    stream: TcpStream,
    buf: Vec<u8>,
    id: i64,
}

impl Peer {
    fn connect(port: u16) -> Peer {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut p = Peer {
            stream,
            buf: Vec::new(),
            id: 0,
        };
        let Frame::Integer(id) = p.call(&["CLIENT", "ID"]).pop().unwrap() else {
            panic!("CLIENT ID")
        };
        p.id = id;
        p
    }

    fn send(&mut self, args: &[&str]) {
        let parts: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream.write_all(&resp_request(&parts)).unwrap();
    }

    fn frame(&mut self) -> Frame {
        loop {
            if let Some((f, used)) = parse_frame(&self.buf, &Limits::default()).expect("RESP") {
                self.buf.drain(..used);
                return f;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.stream.read(&mut chunk).expect("a frame within 20 s");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends `args` and returns every frame up to and including its reply (pushes first).
    fn call(&mut self, args: &[&str]) -> Vec<Frame> {
        self.send(args);
        let mut frames = Vec::new();
        loop {
            let f = self.frame();
            let push = matches!(f, Frame::Push(_));
            frames.push(f);
            if !push {
                return frames;
            }
        }
    }
}

/// Replaces connection ids (in replies that carry them) by their connection's index, so two
/// servers' transcripts compare.
fn ids_to_indexes(f: Frame, ids: &[i64]) -> Frame {
    let map = |f| ids_to_indexes(f, ids);
    match f {
        Frame::Integer(n) => match ids.iter().position(|&i| i == n) {
            Some(i) => Frame::Simple(format!("conn{i}")),
            None => Frame::Integer(n),
        },
        Frame::Array(v) => Frame::Array(v.into_iter().map(map).collect()),
        Frame::Push(v) => Frame::Push(v.into_iter().map(map).collect()),
        Frame::Map(v) => Frame::Map(v.into_iter().map(|(k, v)| (map(k), map(v))).collect()),
        f => f,
    }
}

/// What a scenario step does.
enum Step {
    /// Connection `n` runs a command; `@i` in an argument is connection i's id.
    Run(usize, &'static [&'static str]),
    /// Like `Run`, and the reply carries connection ids.
    RunIds(usize, &'static [&'static str]),
    /// Like `Run`, but the reply differs by nature (HELLO's id): not compared.
    Unchecked(usize, &'static [&'static str]),
    /// Connection `n` disconnects.
    Close(usize),
}

/// Runs the scenario on one server: for each step, what every connection received (the
/// command's own frames, then the pushes each other connection got before a PING's reply).
fn transcript(port: u16, steps: &[Step]) -> Vec<String> {
    let mut peers: Vec<Option<Peer>> = (0..4).map(|_| Some(Peer::connect(port))).collect();
    let ids: Vec<i64> = peers.iter().map(|p| p.as_ref().unwrap().id).collect();
    let mut out = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let (n, args, with_ids, checked) = match step {
            Step::Run(n, a) => (*n, *a, false, true),
            Step::RunIds(n, a) => (*n, *a, true, true),
            Step::Unchecked(n, a) => (*n, *a, false, false),
            Step::Close(n) => {
                peers[*n] = None;
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let template = args;
        let args: Vec<String> = args
            .iter()
            .map(|a| match a.strip_prefix('@') {
                Some(k) => ids[k.parse::<usize>().unwrap()].to_string(),
                None => a.to_string(),
            })
            .collect();
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let mut frames = peers[n].as_mut().expect("open").call(&args);
        if !checked {
            frames.clear();
        }
        if with_ids {
            frames = frames
                .into_iter()
                .map(|f| ids_to_indexes(f, &ids))
                .collect();
        }
        let mut line = format!("step {i} {template:?} -> {frames:?}");
        for (m, p) in peers.iter_mut().enumerate() {
            if m == n {
                continue;
            }
            if let Some(p) = p {
                let mut got = p.call(&["PING"]);
                got.pop();
                if !got.is_empty() {
                    let got: Vec<Frame> =
                        got.into_iter().map(|f| ids_to_indexes(f, &ids)).collect();
                    line.push_str(&format!(" | conn{m} got {got:?}"));
                }
            }
        }
        out.push(line);
    }
    out
}

#[test]
fn tracking_scenario_matches_redis_frame_for_frame() {
    use Step::*;
    let steps = [
        Unchecked(0, &["HELLO", "3"]),
        Unchecked(3, &["HELLO", "3"]),
        Run(2, &["SUBSCRIBE", "__redis__:invalidate"]),
        // Errors and introspection before tracking.
        Run(0, &["CLIENT", "TRACKINGINFO"]),
        Run(0, &["CLIENT", "GETREDIR"]),
        Run(0, &["CLIENT", "CACHING", "yes"]),
        Run(0, &["CLIENT", "TRACKING", "on", "prefix", "x"]),
        Run(0, &["CLIENT", "TRACKING", "on", "bcast", "optin"]),
        Run(0, &["CLIENT", "TRACKING", "on", "optin", "optout"]),
        Run(0, &["CLIENT", "TRACKING", "on", "redirect", "123456"]),
        Run(0, &["CLIENT", "TRACKING", "on", "redirect", "x"]),
        Run(
            0,
            &[
                "CLIENT", "TRACKING", "on", "redirect", "@1", "redirect", "@1",
            ],
        ),
        Run(0, &["CLIENT", "TRACKING", "on", "foo"]),
        Run(0, &["CLIENT", "TRACKING", "maybe"]),
        Run(
            0,
            &[
                "CLIENT", "TRACKING", "on", "bcast", "prefix", "ab", "prefix", "a",
            ],
        ),
        // Default mode: reads are remembered, the first write of each key invalidates once.
        Run(0, &["CLIENT", "TRACKING", "on"]),
        Run(0, &["GET", "k1"]),
        Run(0, &["MGET", "k2", "k3"]),
        Run(0, &["HGET", "h", "f"]),
        Run(0, &["EXISTS", "k4"]),
        Run(1, &["SET", "k1", "v"]),
        Run(1, &["SET", "k1", "again"]),
        Run(1, &["MSET", "k2", "x", "k3", "y"]),
        Run(1, &["HSET", "h", "f", "v"]),
        Run(1, &["DEL", "k4"]),
        Run(1, &["SET", "k4", "1"]),
        Run(0, &["GET", "k1"]),
        Run(0, &["SET", "k1", "mine"]),
        Run(0, &["CLIENT", "TRACKING", "on", "noloop"]),
        Run(0, &["GET", "k1"]),
        Run(0, &["SET", "k1", "quiet"]),
        Run(0, &["CLIENT", "TRACKINGINFO"]),
        Run(0, &["CLIENT", "TRACKING", "on", "bcast"]),
        // Broadcast mode with prefixes.
        Run(0, &["CLIENT", "TRACKING", "off"]),
        Run(
            0,
            &[
                "CLIENT", "TRACKING", "on", "bcast", "prefix", "user:", "prefix", "obj:",
            ],
        ),
        Run(0, &["CLIENT", "TRACKING", "on", "bcast", "prefix", "user:"]),
        Run(0, &["CLIENT", "TRACKING", "on", "bcast", "prefix", "list:"]),
        Run(0, &["CLIENT", "TRACKINGINFO"]),
        Run(1, &["MSET", "user:1", "a", "obj:2", "b", "other", "c"]),
        Run(1, &["INCR", "user:n"]),
        Run(1, &["LPUSH", "list:1", "a", "b"]),
        Run(1, &["EXPIRE", "obj:2", "100"]),
        Run(1, &["SET", "unrelated", "1"]),
        Run(1, &["FLUSHDB"]),
        // RESP2 redirect to a subscriber; OPTIN and OPTOUT.
        RunIds(3, &["CLIENT", "TRACKING", "on", "redirect", "@2"]),
        RunIds(3, &["CLIENT", "GETREDIR"]),
        RunIds(3, &["CLIENT", "TRACKINGINFO"]),
        Run(3, &["GET", "r1"]),
        Run(1, &["SET", "r1", "1"]),
        Run(3, &["CLIENT", "TRACKING", "off"]),
        Run(3, &["CLIENT", "TRACKING", "on", "optin"]),
        Run(3, &["CLIENT", "TRACKING", "on", "optout"]),
        Run(3, &["CLIENT", "CACHING", "no"]),
        Run(3, &["GET", "o1"]),
        Run(1, &["SET", "o1", "1"]),
        Run(3, &["CLIENT", "CACHING", "yes"]),
        Run(3, &["CLIENT", "TRACKINGINFO"]),
        Run(3, &["GET", "o1"]),
        Run(3, &["CLIENT", "TRACKINGINFO"]),
        Run(1, &["SET", "o1", "2"]),
        Run(3, &["CLIENT", "TRACKING", "off"]),
        Run(3, &["CLIENT", "TRACKING", "on", "optout"]),
        Run(3, &["CLIENT", "CACHING", "no"]),
        Run(3, &["GET", "o2"]),
        Run(3, &["GET", "o3"]),
        Run(1, &["MSET", "o2", "1", "o3", "1"]),
        // A redirect to a client that went away.
        Run(3, &["CLIENT", "TRACKING", "off"]),
        RunIds(3, &["CLIENT", "TRACKING", "on", "redirect", "@2"]),
        Run(3, &["GET", "z"]),
        Close(2),
        RunIds(1, &["SET", "z", "1"]),
        RunIds(3, &["CLIENT", "TRACKINGINFO"]),
        Run(1, &["FLUSHALL"]),
    ];
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    let a = transcript(kvik.port, &steps);
    let b = transcript(redis.port, &steps);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x, y, "\nkvik:  {x}\nredis: {y}");
    }
    assert_eq!(a.len(), b.len());
}

/// redis-py's own client-side cache (RESP3, CLIENT TRACKING ON, invalidation pushes): reads are
/// served from its memory, and a write from another client reaches it. redis-py refuses servers
/// below 7.4 by version number alone; the test lowers that gate, not the protocol.
#[test]
fn redis_py_client_side_cache_is_invalidated_by_another_clients_write() {
    let s = TestServer::start();
    let script = r#"
import sys, time, redis
import redis.connection
from redis.cache import CacheConfig
redis.connection.CacheProxyConnection.MIN_ALLOWED_VERSION = "7.0.0"
port = int(sys.argv[1])
r = redis.Redis(port=port, protocol=3, cache_config=CacheConfig())
w = redis.Redis(port=port)
def calls():
    return w.info('commandstats').get('cmdstat_get', {}).get('calls', 0)
def until(f):
    deadline = time.time() + 10
    while not f() and time.time() < deadline:
        time.sleep(0.01)
w.set('k', 'v1')
print(r.get('k'))
before = calls()
print([r.get('k') for _ in range(5)], calls() - before)
w.set('k', 'v2')
until(lambda: r.get('k') == b'v2')
print(r.get('k'))
w.delete('k')
until(lambda: r.get('k') is None)
print(r.get('k'))
w.mset({'a': '1', 'b': '2'})
print(r.mget('a', 'b'))
w.flushall()
until(lambda: r.mget('a', 'b') == [None, None])
print(r.mget('a', 'b'))
"#;
    let Some(stdout) = kvik_testkit::python_stdout(script, &[&s.port.to_string()]) else {
        return;
    };
    assert_eq!(
        stdout,
        "b'v1'\n[b'v1', b'v1', b'v1', b'v1', b'v1'] 0\nb'v2'\nNone\n[b'1', b'2']\n[None, None]\n"
    );
}

/// The `redis` crate over RESP2: invalidations redirected to a subscribed connection, in
/// default and broadcast mode, and the counters INFO shows.
#[test]
fn resp2_redirect_delivers_invalidations_to_a_subscriber() {
    let s = TestServer::start();
    let mut sub = redis::Client::open(s.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let sub_id: i64 = q(&mut sub, &["CLIENT", "ID"]);
    let mut ps = sub.as_pubsub();
    ps.subscribe("__redis__:invalidate").unwrap();
    ps.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = s.client();
    let mut writer = s.client();
    let id = sub_id.to_string();
    let _: () = q(&mut reader, &["CLIENT", "TRACKING", "on", "REDIRECT", &id]);
    let _: Option<String> = q(&mut reader, &["GET", "cached"]);
    let _: () = q(&mut writer, &["SET", "cached", "1"]);
    let msg = ps.get_message().unwrap();
    assert_eq!(msg.get_channel_name(), "__redis__:invalidate");
    assert_eq!(msg.get_payload::<Vec<String>>().unwrap(), ["cached"]);
    assert_eq!(
        info_field(&mut writer, "clients", "tracking_clients"),
        Some(1)
    );
    assert_eq!(
        info_field(&mut writer, "stats", "tracking_total_keys"),
        Some(0)
    );

    let _: () = q(&mut reader, &["CLIENT", "TRACKING", "off"]);
    let _: () = q(
        &mut reader,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:", "REDIRECT", &id,
        ],
    );
    let _: () = q(&mut writer, &["MSET", "p:1", "a", "q:1", "b", "p:2", "c"]);
    let msg = ps.get_message().unwrap();
    assert_eq!(msg.get_payload::<Vec<String>>().unwrap(), ["p:1", "p:2"]);
    assert_eq!(
        info_field(&mut writer, "stats", "tracking_total_prefixes"),
        Some(1)
    );
    let list: String = q(&mut writer, &["CLIENT", "LIST"]);
    assert!(list.contains("flags=tB"), "{list}");
    drop(reader);
    assert!(eventually(Duration::from_secs(10), || {
        info_field(&mut writer, "clients", "tracking_clients") == Some(0)
    }));
}

/// `tracking-table-max-keys`: past the limit keys are forgotten, each with an invalidation.
#[test]
fn tracking_table_is_bounded_and_evicts_with_invalidations() {
    let s = TestServer::start();
    let mut admin = s.client();
    let _: () = q(
        &mut admin,
        &["CONFIG", "SET", "tracking-table-max-keys", "10"],
    );
    let mut c = connect_raw(s.port);
    let hello = resp_str(&["HELLO", "3"]);
    c.write_all(&hello).unwrap();
    let mut p = Peer {
        stream: c,
        buf: Vec::new(),
        id: 0,
    };
    p.frame();
    p.call(&["CLIENT", "TRACKING", "on"]);
    let keys: Vec<String> = (0..50).map(|i| format!("key{i}")).collect();
    let mut args = vec!["MGET"];
    args.extend(keys.iter().map(|k| k.as_str()));
    let frames = p.call(&args);
    let pushes = frames.len() - 1;
    assert_eq!(pushes, 0, "invalidations follow the reply");
    let mut invalidated = 0;
    while invalidated < 40 {
        match p.frame() {
            Frame::Push(v) if v[0] == Frame::Bulk(b"invalidate".to_vec()) => invalidated += 1,
            f => panic!("unexpected {f:?}"),
        }
    }
    assert_eq!(
        info_field(&mut admin, "stats", "tracking_total_keys"),
        Some(10)
    );
}

#[test]
fn client_pause_write_holds_writes_but_not_reads() {
    let s = TestServer::start();
    let mut admin = s.client();
    let mut other = s.client();
    let _: () = q(&mut other, &["SET", "k", "before"]);
    let _: () = q(&mut admin, &["CLIENT", "PAUSE", "60000", "WRITE"]);
    // Reads go on; a write waits (it holds no worker: many of them do not stop the reads).
    let mut writers: Vec<TcpStream> = (0..12).map(|_| connect_raw(s.port)).collect();
    for (i, w) in writers.iter_mut().enumerate() {
        w.write_all(&resp_str(&["SET", "k", &format!("w{i}")]))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let v: String = q(&mut other, &["GET", "k"]);
    assert_eq!(v, "before");
    let n: i64 = q(&mut other, &["EXISTS", "k", "nokey"]);
    assert_eq!(n, 1);
    for w in writers.iter_mut() {
        w.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        assert_eq!(read_raw(w, 1).0, b"", "a write answered during the pause");
    }
    let _: () = q(&mut admin, &["CLIENT", "UNPAUSE"]);
    for w in writers.iter_mut() {
        w.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(read_raw(w, 5).0, b"+OK\r\n");
    }
    // PAUSE ALL holds reads too, until its deadline.
    let _: () = q(&mut admin, &["CLIENT", "PAUSE", "300", "ALL"]);
    let started = std::time::Instant::now();
    let v: String = q(&mut other, &["GET", "k"]);
    assert!(v.starts_with('w'));
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(
        err(&mut admin, &["CLIENT", "PAUSE", "10", "NEVER"]),
        "ERR CLIENT PAUSE mode must be WRITE or ALL"
    );
    assert_eq!(
        err(&mut admin, &["CLIENT", "PAUSE", "-1"]),
        "ERR timeout is negative"
    );
}

#[test]
fn client_reply_off_and_skip_silence_replies_but_not_pushes() {
    let s = TestServer::start();
    let mut c = connect_raw(s.port);
    let mut send = Vec::new();
    for args in [
        &["CLIENT", "REPLY", "OFF"][..],
        &["SET", "a", "1"],
        &["GET", "a"],
        &["NOSUCHCOMMAND"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "a"],
        &["CLIENT", "REPLY", "SKIP"],
        &["GET", "a"],
        &["ECHO", "after"],
    ] {
        send.extend(resp_str(args));
    }
    c.write_all(&send).unwrap();
    let want = b"+OK\r\n$1\r\n1\r\n$5\r\nafter\r\n";
    assert_eq!(read_raw(&mut c, want.len()).0, want);
    // Pub/sub messages still arrive while replies are off (RESP3 pushes).
    let mut sub = connect_raw(s.port);
    sub.write_all(&resp_str(&["HELLO", "3"])).unwrap();
    let mut p = Peer {
        stream: sub,
        buf: Vec::new(),
        id: 0,
    };
    p.frame();
    p.send(&["SUBSCRIBE", "ch"]);
    p.frame(); // the confirmation is a push in RESP3
    p.send(&["CLIENT", "REPLY", "OFF"]);
    let mut publisher = s.client();
    let _: i64 = q(&mut publisher, &["PUBLISH", "ch", "m"]);
    assert_eq!(
        p.frame(),
        Frame::Push(vec![
            Frame::Bulk(b"message".to_vec()),
            Frame::Bulk(b"ch".to_vec()),
            Frame::Bulk(b"m".to_vec())
        ])
    );
}

#[test]
fn client_list_shows_multi_watch_blocked_and_no_evict() {
    let s = TestServer::start();
    let mut a = s.client();
    let mut b = s.client();
    let b_id: i64 = q(&mut b, &["CLIENT", "ID"]);
    let line = |a: &mut redis::Connection| -> String {
        q(a, &["CLIENT", "LIST", "ID", &b_id.to_string()])
    };
    let _: () = q(&mut b, &["WATCH", "x", "y"]);
    let _: () = q(&mut b, &["MULTI"]);
    let _: String = q(&mut b, &["SET", "x", "1"]);
    let l = line(&mut a);
    assert!(
        l.contains("flags=x ") && l.contains("multi=1 watch=2 "),
        "{l}"
    );
    let _: redis::Value = q(&mut b, &["EXEC"]);
    let _: () = q(&mut b, &["CLIENT", "NO-EVICT", "on"]);
    let l = line(&mut a);
    assert!(
        l.contains("flags=e ") && l.contains("multi=-1 watch=0 "),
        "{l}"
    );
    let _: () = q(&mut b, &["CLIENT", "NO-EVICT", "off"]);
    // Blocked: flag b and INFO blocked_clients the moment it blocks, also with a 1 ms timeout
    // (seen by a transaction of the blocking client's own pipeline order).
    let mut raw = connect_raw(s.port);
    raw.write_all(&resp_str(&["BLPOP", "nolist", "0"])).unwrap();
    assert!(eventually(Duration::from_secs(10), || {
        info_field(&mut a, "clients", "blocked_clients") == Some(1)
    }));
    let list: String = q(&mut a, &["CLIENT", "LIST"]);
    assert!(list.contains("flags=b "), "{list}");
    let _: i64 = q(&mut a, &["LPUSH", "nolist", "v"]);
    assert!(read_raw(&mut raw, 10).0.ends_with(b"v\r\n"));
    assert_eq!(info_field(&mut a, "clients", "blocked_clients"), Some(0));
    let list: String = q(&mut a, &["CLIENT", "LIST"]);
    assert!(!list.contains("flags=b "), "{list}");
}

#[test]
fn reset_turns_tracking_and_silenced_replies_off() {
    let s = TestServer::start();
    let mut c = connect_raw(s.port);
    let mut send = Vec::new();
    for args in [
        &["CLIENT", "TRACKING", "on"][..],
        &["CLIENT", "REPLY", "OFF"],
        &["RESET"],
        &["CLIENT", "GETREDIR"],
    ] {
        send.extend(resp_str(args));
    }
    c.write_all(&send).unwrap();
    let want = b"+OK\r\n+RESET\r\n:-1\r\n";
    assert_eq!(read_raw(&mut c, want.len()).0, want);
}
