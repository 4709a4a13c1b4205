//! Pub/Sub and keyspace notifications against the real server with real clients: the `redis`
//! crate's pub/sub, redis-cli, redis-py (listen, get_message, psubscribe), raw RESP2/RESP3
//! bytes compared with redis-server's, a slow subscriber cut off at its output limit, a publish
//! storm to thousands of subscribers on several I/O threads, and the keyspace events of every
//! write family compared with the ones redis-server emits for the same commands.

use crate::common::*;
use kvik_testkit::RedisServer;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

/// A pub/sub connection of the `redis` crate with a read timeout, so no test can hang.
fn pubsub_con(port: u16) -> redis::Connection {
    let con = kvik_testkit::connect(port);
    con.set_read_timeout(Some(WAIT)).unwrap();
    con
}

#[test]
fn redis_crate_subscribe_psubscribe_publish_and_pubsub_introspection() {
    let s = TestServer::start();
    let mut publisher = s.client();
    let mut sub_con = pubsub_con(s.port);
    let mut sub = sub_con.as_pubsub();
    sub.subscribe("news").unwrap();
    sub.subscribe("sport").unwrap();
    sub.psubscribe("n*").unwrap();

    // A subscriber on "news" and the pattern: two receivers.
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "news", "hello"]), 2);
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "nope", "x"]), 1);
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "other", "x"]), 0);
    let mut got = Vec::new();
    for _ in 0..3 {
        let m = sub.get_message().unwrap();
        let pattern: Option<String> = m.get_pattern().ok();
        got.push((
            m.get_channel_name().to_string(),
            m.get_payload::<String>().unwrap(),
            pattern,
        ));
    }
    got.sort();
    assert_eq!(
        got,
        vec![
            ("news".into(), "hello".into(), None),
            ("news".into(), "hello".into(), Some("n*".into())),
            ("nope".into(), "x".into(), Some("n*".into())),
        ]
    );

    let mut channels: Vec<String> = q(&mut publisher, &["PUBSUB", "CHANNELS"]);
    channels.sort();
    assert_eq!(channels, ["news", "sport"]);
    let matching: Vec<String> = q(&mut publisher, &["PUBSUB", "CHANNELS", "s*"]);
    assert_eq!(matching, ["sport"]);
    let numsub: Vec<redis::Value> = q(&mut publisher, &["PUBSUB", "NUMSUB", "news", "zzz"]);
    assert_eq!(
        numsub,
        vec![
            redis::Value::BulkString(b"news".to_vec()),
            redis::Value::Int(1),
            redis::Value::BulkString(b"zzz".to_vec()),
            redis::Value::Int(0),
        ]
    );
    assert_eq!(q::<i64>(&mut publisher, &["PUBSUB", "NUMPAT"]), 1);
    let list: String = q(&mut publisher, &["CLIENT", "LIST"]);
    assert!(
        list.lines()
            .any(|l| l.contains("flags=P") && l.contains("sub=2 psub=1 ssub=0")),
        "{list}"
    );
    let subscribers: String = q(&mut publisher, &["CLIENT", "LIST", "TYPE", "pubsub"]);
    assert_eq!(subscribers.lines().count(), 1, "{subscribers}");
    let normal: String = q(&mut publisher, &["CLIENT", "LIST", "TYPE", "normal"]);
    assert!(!normal.contains("flags=P"), "{normal}");
    let stats = info(&mut publisher, "stats");
    assert_eq!(stats["Stats"]["pubsub_channels"], "2");
    assert_eq!(stats["Stats"]["pubsub_patterns"], "1");

    sub.unsubscribe("news").unwrap();
    sub.punsubscribe("n*").unwrap();
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "news", "late"]), 0);
    drop(sub);
    drop(sub_con);
    // A disconnect unsubscribes everything.
    assert!(eventually(WAIT, || q::<i64>(
        &mut publisher,
        &["PUBLISH", "sport", "x"]
    ) == 0));
    // CLIENT KILL TYPE pubsub cuts off subscribers only.
    let mut other_con = pubsub_con(s.port);
    let mut other = other_con.as_pubsub();
    other.subscribe("x").unwrap();
    assert_eq!(
        q::<i64>(&mut publisher, &["CLIENT", "KILL", "TYPE", "pubsub"]),
        1
    );
    assert!(eventually(WAIT, || q::<i64>(
        &mut publisher,
        &["PUBLISH", "x", "gone"]
    ) == 0));
}

/// Sends `requests` on a fresh raw connection, then QUIT, and returns everything the server
/// wrote until it closed the connection.
fn raw_session(port: u16, requests: &[&[&str]]) -> Vec<u8> {
    let mut s = kvik_testkit::connect_raw(port);
    let mut bytes = Vec::new();
    for r in requests {
        bytes.extend(resp_str(r));
    }
    bytes.extend(resp_str(&["QUIT"]));
    let (out, closed) = roundtrip_raw(&mut s, &bytes, usize::MAX);
    assert!(closed, "the server must close after QUIT");
    out
}

#[test]
fn subscribe_context_and_resp3_pushes_match_redis_byte_for_byte() {
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    let sessions: &[&[&[&str]]] = &[
        // RESP2: only the pub/sub commands, PING, QUIT and RESET; PING answers as a push.
        &[
            &["SUBSCRIBE", "a"],
            &["GET", "x"],
            &["PING"],
            &["PING", "hi"],
            &["CONFIG", "GET", "maxclients"],
            &["PSUBSCRIBE", "p*"],
            &["SSUBSCRIBE", "s"],
            &["UNSUBSCRIBE", "a", "zz"],
            &["PUNSUBSCRIBE"],
            &["SUNSUBSCRIBE"],
            &["UNSUBSCRIBE"],
            &["PING"],
            &["GET", "x"],
        ],
        // RESET leaves the subscribe context.
        &[
            &["SUBSCRIBE", "a"],
            &["RESET"],
            &["GET", "x"],
            &["PUBSUB", "NUMSUB", "a"],
        ],
        // RESP3: pushes, and any command may run while subscribed.
        &[
            &["HELLO", "3"],
            &["SUBSCRIBE", "a"],
            &["GET", "x"],
            &["PING"],
            &["UNSUBSCRIBE", "b"],
            &["SSUBSCRIBE", "s1"],
            &["SUNSUBSCRIBE", "s1"],
            &["UNSUBSCRIBE"],
            &["UNSUBSCRIBE"],
        ],
    ];
    for requests in sessions {
        let k = raw_session(kvik.port, requests);
        let r = raw_session(redis.port, requests);
        // HELLO's reply names the server version; compare what follows it.
        let strip = |b: Vec<u8>| -> String {
            let s = String::from_utf8_lossy(&b).into_owned();
            match s.find("modules\r\n*0\r\n") {
                Some(i) => s[i..].to_string(),
                None => s,
            }
        };
        assert_eq!(strip(k), strip(r), "{requests:?}");
    }
}

#[test]
fn resp3_subscriber_gets_push_frames_between_replies() {
    let s = TestServer::start();
    let mut publisher = s.client();
    let mut sub = s.raw();
    let hello = roundtrip_raw(&mut sub, &resp_str(&["HELLO", "3"]), 1).0;
    assert!(hello.starts_with(b"%7"));
    let mut expect = b">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n".to_vec();
    let (got, _) = roundtrip_raw(&mut sub, &resp_str(&["SUBSCRIBE", "ch"]), expect.len());
    assert_eq!(got, expect);
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "ch", "m1"]), 1);
    expect = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm1\r\n".to_vec();
    assert_eq!(read_raw(&mut sub, expect.len()).0, expect);
    // A normal command's reply, then the next push.
    let (got, _) = roundtrip_raw(&mut sub, &resp_str(&["SET", "k", "v"]), 5);
    assert_eq!(got, b"+OK\r\n");
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "ch", "m2"]), 1);
    expect = b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nm2\r\n".to_vec();
    assert_eq!(read_raw(&mut sub, expect.len()).0, expect);
}

#[test]
fn redis_cli_subscribe_receives_messages() {
    let s = TestServer::start();
    let mut child = std::process::Command::new("timeout")
        .args([
            "20",
            "redis-cli",
            "-p",
            &s.port.to_string(),
            "subscribe",
            "cli",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("redis-cli must be installed");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // subscribe, cli, 1
    let first: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    assert_eq!(first, ["subscribe", "cli", "1"]);
    let mut publisher = s.client();
    assert_eq!(q::<i64>(&mut publisher, &["PUBLISH", "cli", "hi there"]), 1);
    let msg: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    assert_eq!(msg, ["message", "cli", "hi there"]);
    let _ = child.kill();
    let _ = child.wait();
}

const PY_PUBSUB: &str = r#"
import sys, threading, time, redis
port = int(sys.argv[1])
r = redis.Redis(port=port, decode_responses=True)
p = r.pubsub()
p.subscribe('jobs')
p.psubscribe('events.*')
confirm = [p.get_message(timeout=5) for _ in range(2)]
assert [m['type'] for m in confirm] == ['subscribe', 'psubscribe'], confirm
assert r.publish('jobs', 'one') == 1
assert r.publish('events.login', 'alice') == 1
m = p.get_message(timeout=5)
assert (m['type'], m['channel'], m['data']) == ('message', 'jobs', 'one'), m
m = p.get_message(timeout=5)
assert (m['type'], m['pattern'], m['channel'], m['data']) == ('pmessage', 'events.*', 'events.login', 'alice'), m
assert r.pubsub_numsub('jobs') == [('jobs', 1)]
assert r.pubsub_numpat() == 1

# listen() in a thread, fed by a publisher, ended by a message.
got = []
def listener():
    for m in p.listen():
        if m['type'] in ('message', 'pmessage'):
            got.append(m['data'])
            if m['data'] == 'stop':
                return
t = threading.Thread(target=listener)
t.start()
for i in range(100):
    r.publish('jobs', str(i))
r.publish('events.x', 'stop')
t.join(10)
assert not t.is_alive()
assert got == [str(i) for i in range(100)] + ['stop'], got
p.unsubscribe()
p.punsubscribe()
p.close()
# Keyspace notifications as redis-py users consume them.
r.config_set('notify-keyspace-events', 'KEA')
assert r.config_get('notify-keyspace-events') == {'notify-keyspace-events': 'AKE'}
k = r.pubsub()
k.psubscribe('__keyspace@0__:*')
k.get_message(timeout=5)
r.set('user:1', 'x')
r.delete('user:1')
events = []
while len(events) < 2:
    m = k.get_message(timeout=5)
    assert m is not None, events
    if m['type'] == 'pmessage':
        events.append((m['channel'], m['data']))
assert events == [('__keyspace@0__:user:1', 'set'), ('__keyspace@0__:user:1', 'del')], events
print('OK')
"#;

#[test]
fn redis_py_pubsub_listen_get_message_and_patterns() {
    let s = TestServer::start();
    let Some(out) = kvik_testkit::run_python(PY_PUBSUB, &[&s.port.to_string()]) else {
        return;
    };
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("OK"),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn slow_subscriber_is_disconnected_and_memory_stays_bounded() {
    let s = TestServer::start();
    let mut publisher = s.client();
    let _: () = q(
        &mut publisher,
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 4mb 2mb 60",
        ],
    );
    let limits: Vec<String> = q(
        &mut publisher,
        &["CONFIG", "GET", "client-output-buffer-limit"],
    );
    assert!(
        limits[1].contains("pubsub 4194304 2097152 60"),
        "{limits:?}"
    );
    // A subscriber that never reads.
    let mut slow = s.raw();
    let confirm = b"*3\r\n$9\r\nsubscribe\r\n$5\r\nflood\r\n:1\r\n";
    let (got, _) = roundtrip_raw(&mut slow, &resp_str(&["SUBSCRIBE", "flood"]), confirm.len());
    assert_eq!(got, confirm);
    let rss_before = s.rss_kib();
    // 256 MB published in 64 KB messages, 64 per pipeline.
    let payload = "x".repeat(64 * 1024);
    for _ in 0..64 {
        let mut pipe = redis::pipe();
        for _ in 0..64 {
            pipe.cmd("PUBLISH").arg("flood").arg(&payload);
        }
        let _: Vec<i64> = pipe.query(&mut publisher).unwrap();
    }
    let rss_after = s.rss_kib();
    // The subscriber was cut off: nobody listens any more.
    assert!(eventually(WAIT, || {
        let numsub: Vec<redis::Value> = q(&mut publisher, &["PUBSUB", "NUMSUB", "flood"]);
        numsub[1] == redis::Value::Int(0)
    }));
    let list: String = q(&mut publisher, &["CLIENT", "LIST"]);
    assert!(!list.contains("sub=1"), "{list}");
    // Its socket ends: what the kernel buffered, then EOF.
    slow.set_read_timeout(Some(WAIT)).unwrap();
    let (_, closed) = read_raw(&mut slow, usize::MAX);
    assert!(closed, "the slow subscriber must be disconnected");
    // Memory: the 256 MB never piled up (the limit is 4 MB; allow allocator slack).
    assert!(
        rss_after < rss_before + 96 * 1024,
        "RSS grew from {rss_before} KiB to {rss_after} KiB"
    );
}

/// Parses the `message` pushes in `bytes` (RESP2), returning their payloads.
fn message_payloads(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let parts: Vec<&str> = text.split("\r\n").collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 6 < parts.len() {
        assert_eq!(parts[i], "*3", "{text}");
        assert_eq!(parts[i + 2], "message");
        out.push(parts[i + 6].to_string());
        i += 7;
    }
    out
}

/// Run twice: delivered by a worker (the fan-out above `pubsub-rtc-max-receivers`) and on
/// the publisher's I/O thread (the limit raised above it).
#[test]
fn publish_storm_to_thousands_of_subscribers_keeps_per_publisher_order() {
    for rtc_max in ["1024", "4096"] {
        publish_storm(&[
            "--io-threads",
            "4",
            "--io-threads-adaptive",
            "no",
            "--pubsub-rtc-max-receivers",
            rtc_max,
        ]);
    }
}

fn publish_storm(args: &[&str]) {
    const SUBSCRIBERS: usize = 2000;
    const PUBLISHERS: usize = 3;
    const MESSAGES: usize = 40;
    let s = TestServer::start_with(args);
    let confirm = b"*3\r\n$9\r\nsubscribe\r\n$5\r\nstorm\r\n:1\r\n";
    let mut subs: Vec<TcpStream> = Vec::with_capacity(SUBSCRIBERS);
    for _ in 0..SUBSCRIBERS {
        let mut c = s.raw();
        c.write_all(&resp_str(&["SUBSCRIBE", "storm"])).unwrap();
        subs.push(c);
    }
    for c in &mut subs {
        assert_eq!(read_raw(c, confirm.len()).0, confirm);
    }
    let port = s.port;
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            std::thread::spawn(move || {
                let mut con = kvik_testkit::connect(port);
                let mut pipe = redis::pipe();
                for i in 0..MESSAGES {
                    pipe.cmd("PUBLISH").arg("storm").arg(format!("{p}:{i:03}"));
                }
                let counts: Vec<i64> = pipe.query(&mut con).unwrap();
                assert!(
                    counts.iter().all(|&n| n == SUBSCRIBERS as i64),
                    "{counts:?}"
                );
            })
        })
        .collect();
    for p in publishers {
        p.join().unwrap();
    }
    // Each message is `*3 $7 message $5 storm $5 p:iii`: 4 + 13 + 11 + 11 = 39 bytes.
    let expect_len = PUBLISHERS * MESSAGES * 39;
    for c in &mut subs {
        let (bytes, _) = read_raw(c, expect_len);
        assert_eq!(bytes.len(), expect_len);
        let payloads = message_payloads(&bytes);
        for p in 0..PUBLISHERS {
            let mine: Vec<&String> = payloads
                .iter()
                .filter(|m| m.starts_with(&format!("{p}:")))
                .collect();
            let want: Vec<String> = (0..MESSAGES).map(|i| format!("{p}:{i:03}")).collect();
            assert_eq!(
                mine,
                want.iter().collect::<Vec<_>>(),
                "publisher {p}'s order"
            );
        }
    }
}

/// One step of the keyspace differential: a command, then the notifications it caused.
pub(crate) fn keyspace_events(port: u16, commands: &[&[&str]], flags: &str) -> Vec<String> {
    let mut con = kvik_testkit::connect(port);
    let _: () = q(&mut con, &["FLUSHALL"]);
    let _: () = q(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", flags],
    );
    let mut sub_con = pubsub_con(port);
    let mut sub = sub_con.as_pubsub();
    sub.psubscribe("__key*__:*").unwrap();
    sub.subscribe("step-done").unwrap();
    let mut log = Vec::new();
    for (i, c) in commands.iter().enumerate() {
        let mut cmd = redis::cmd(c[0]);
        for a in &c[1..] {
            cmd.arg(*a);
        }
        let reply: redis::RedisResult<redis::Value> = cmd.query(&mut con);
        log.push(format!("> {c:?} ok={}", reply.is_ok()));
        // Published after the command by the same client: every notification of the command
        // arrives before it (per-publisher order).
        let _: i64 = q(&mut con, &["PUBLISH", "step-done", &i.to_string()]);
        loop {
            let m = sub.get_message().expect("notifications arrive");
            let channel = m.get_channel_name().to_string();
            let payload: String = m.get_payload().unwrap();
            if channel == "step-done" {
                assert_eq!(payload, i.to_string());
                break;
            }
            log.push(format!("  {channel} {payload}"));
        }
    }
    log
}

/// Commands of every write family (and a few that must stay silent), chosen so their
/// notifications do not depend on randomness or time.
const KEYSPACE_STEPS: &[&[&str]] = &[
    // strings
    &["SET", "k", "v"],
    &["SET", "k", "v2", "EX", "100"],
    &["SET", "k", "v3", "KEEPTTL"],
    &["SETNX", "k", "x"],
    &["SETNX", "k2", "x"],
    &["APPEND", "k", "zz"],
    &["INCR", "n"],
    &["INCRBY", "n", "5"],
    &["DECR", "n"],
    &["DECRBY", "n", "2"],
    &["INCRBYFLOAT", "f", "1.5"],
    &["SETRANGE", "k", "1", "q"],
    &["SETRANGE", "k", "1", ""],
    &["GETSET", "k", "v3"],
    &["MSET", "a", "1", "b", "2"],
    &["MSETNX", "a", "1", "c", "2"],
    &["MSETNX", "c", "1", "d", "2"],
    &["GETDEL", "a"],
    &["GETEX", "b", "EX", "100"],
    &["GETEX", "b", "PERSIST"],
    &["GETEX", "b", "PERSIST"],
    &["GETEX", "b"],
    &["PSETEX", "p", "100000", "v"],
    &["SETEX", "s", "100", "v"],
    &["GET", "k"],
    // keys
    &["DEL", "k", "nope", "c"],
    &["UNLINK", "d"],
    &["EXPIRE", "b", "100"],
    &["PEXPIRE", "b", "100000"],
    &["EXPIREAT", "b", "99999999999"],
    &["PERSIST", "b"],
    &["PERSIST", "b"],
    &["RENAME", "b", "b2"],
    &["RENAMENX", "b2", "s"],
    &["COPY", "b2", "b3"],
    &["MOVE", "b3", "1"],
    &["EXPIRE", "b2", "-1"],
    &["TOUCH", "s"],
    // hashes
    &["HSET", "h", "a", "1", "b", "2"],
    &["HSETNX", "h", "a", "9"],
    &["HSETNX", "h", "c", "3"],
    &["HINCRBY", "h", "a", "5"],
    &["HINCRBYFLOAT", "h", "a", "1.5"],
    &["HDEL", "h", "a", "nope"],
    &["HDEL", "h", "b", "c"],
    &["HMSET", "h2", "x", "1"],
    // lists
    &["RPUSH", "l", "a", "b", "c", "d", "e"],
    &["LPUSH", "l", "z"],
    &["LPUSHX", "l", "y"],
    &["RPUSHX", "nol", "x"],
    &["LINSERT", "l", "BEFORE", "a", "q"],
    &["LSET", "l", "0", "w"],
    &["LPOP", "l"],
    &["RPOP", "l", "2"],
    &["LREM", "l", "0", "q"],
    &["LTRIM", "l", "0", "1"],
    &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
    &["RPOPLPUSH", "l", "l2"],
    &["LMPOP", "1", "l2", "LEFT", "COUNT", "1"],
    &["BLPOP", "l2", "0"],
    &["RPUSH", "l3", "a"],
    &["LPOP", "l3"],
    // sets
    &["SADD", "s1", "a", "b", "c"],
    &["SADD", "s1", "a"],
    &["SREM", "s1", "a"],
    &["SMOVE", "s1", "s2", "c"],
    &["SADD", "one", "m"],
    &["SPOP", "one"],
    &["SADD", "s1", "x", "y"],
    &["SADD", "s2", "y", "z"],
    &["SINTERSTORE", "s3", "s1", "s2"],
    &["SUNIONSTORE", "s4", "s1", "s2"],
    &["SDIFFSTORE", "s3", "s1", "s1"],
    &["SPOP", "s4", "10"],
    // sorted sets
    &[
        "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ],
    &["ZADD", "z", "1", "a"],
    &["ZADD", "z", "9", "a"],
    &["ZINCRBY", "z", "1", "a"],
    &["ZREM", "z", "a", "nope"],
    &["ZREMRANGEBYSCORE", "z", "2", "2"],
    &["ZREMRANGEBYRANK", "z", "0", "0"],
    &["ZREMRANGEBYLEX", "z", "[d", "[d"],
    &["ZADD", "z", "6", "f", "7", "g"],
    &["ZPOPMIN", "z"],
    &["ZPOPMAX", "z"],
    &["ZADD", "z2", "1", "x"],
    &["ZUNIONSTORE", "z3", "2", "z", "z2"],
    &["ZINTERSTORE", "z4", "2", "z", "z2"],
    &["ZDIFFSTORE", "z5", "1", "z"],
    &["ZRANGESTORE", "z6", "z", "0", "-1"],
    &["ZMPOP", "1", "z", "MIN"],
    &["BZPOPMIN", "z3", "0"],
    &["ZADD", "y", "1", "a"],
    &["ZREM", "y", "a"],
    // RESTORE, and FLUSHDB (silent in Redis 7.0)
    &["SET", "dumped", "payload"],
    &["FLUSHDB"],
];

#[test]
fn keyspace_notifications_of_every_family_match_redis() {
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    for flags in ["KEA", "Kgn", "E$lshz", "Ex"] {
        let k = keyspace_events(kvik.port, KEYSPACE_STEPS, flags);
        let r = keyspace_events(redis.port, KEYSPACE_STEPS, flags);
        for (a, b) in k.iter().zip(&r) {
            assert_eq!(a, b, "flags {flags}: first difference (kvik, redis)");
        }
        assert_eq!(k.len(), r.len(), "flags {flags}");
    }
}

/// The events of the commands inside EXEC and of a script, in Redis's order: each key's `new`
/// before the command's own event (kvik buffers a transaction's writes, but tells what they
/// create as they are made).
#[test]
fn keyspace_events_inside_exec_and_scripts_match_redis() {
    fn events(port: u16) -> Vec<String> {
        let mut con = kvik_testkit::connect(port);
        let _: () = q(&mut con, &["FLUSHALL"]);
        let _: () = q(
            &mut con,
            &["CONFIG", "SET", "notify-keyspace-events", "KEAn"],
        );
        let mut sub_con = pubsub_con(port);
        let mut sub = sub_con.as_pubsub();
        sub.psubscribe("__key*__:*").unwrap();
        sub.subscribe("done").unwrap();
        let _: () = q(&mut con, &["SET", "old", "1", "PX", "1"]);
        std::thread::sleep(std::time::Duration::from_millis(20));
        let _: redis::Value = redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("t1")
            .arg("v")
            .arg("EX")
            .arg(100)
            .cmd("INCR")
            .arg("t2")
            .cmd("INCR")
            .arg("t2")
            .cmd("SET")
            .arg("old")
            .arg("2")
            .cmd("DEL")
            .arg("t1")
            .cmd("HSET")
            .arg("t1")
            .arg("f")
            .arg("v")
            .query(&mut con)
            .unwrap();
        let script = "redis.call('set', KEYS[1], 'v', 'EX', 100) redis.call('incr', KEYS[2]) \
                      redis.call('incr', KEYS[2]) redis.call('del', KEYS[1]) \
                      redis.call('sadd', KEYS[1], 'm') return 1";
        let _: i64 = q(&mut con, &["EVAL", script, "2", "e1", "e2"]);
        let _: i64 = q(&mut con, &["PUBLISH", "done", "1"]);
        let mut log = Vec::new();
        loop {
            let m = sub.get_message().expect("notifications arrive");
            let channel = m.get_channel_name().to_string();
            if channel == "done" {
                return log;
            }
            let payload: String = m.get_payload().unwrap();
            log.push(format!("{channel} {payload}"));
        }
    }
    let kvik = TestServer::start();
    let redis = RedisServer::start(&[]);
    let (k, r) = (events(kvik.port), events(redis.port));
    assert!(
        r.iter().any(|e| e.ends_with(" new")),
        "the sequence creates keys: {r:?}"
    );
    assert_eq!(k, r);
}

#[test]
fn expired_and_restored_keys_are_notified() {
    let s = TestServer::start();
    let mut con = s.client();
    let _: () = q(
        &mut con,
        &["CONFIG", "SET", "notify-keyspace-events", "Egx"],
    );
    let flags: Vec<String> = q(&mut con, &["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(flags, ["notify-keyspace-events", "gxE"]);
    assert!(
        err(&mut con, &["CONFIG", "SET", "notify-keyspace-events", "Kq"])
            .contains("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
    );
    let mut sub_con = pubsub_con(s.port);
    let mut sub = sub_con.as_pubsub();
    sub.psubscribe("__keyevent@0__:*").unwrap();
    let _: () = q(&mut con, &["SET", "short", "v", "PX", "50"]);
    let dump: Vec<u8> = {
        let _: () = q(&mut con, &["SET", "src", "v"]);
        q(&mut con, &["DUMP", "src"])
    };
    let _: () = redis::cmd("RESTORE")
        .arg("restored")
        .arg(0)
        .arg(dump)
        .query(&mut con)
        .unwrap();
    // Active expiry removes "short" without any client touching it.
    let mut seen = Vec::new();
    while !seen.contains(&("expired".to_string(), "short".to_string())) {
        let m = sub.get_message().expect("the expired event arrives");
        let event = m
            .get_channel_name()
            .trim_start_matches("__keyevent@0__:")
            .to_string();
        seen.push((event, m.get_payload::<String>().unwrap()));
    }
    assert!(
        seen.contains(&("restore".into(), "restored".into())),
        "{seen:?}"
    );
}

#[test]
fn cluster_publish_reaches_every_node_and_shard_channels_follow_slots() {
    let nodes = kvik_testkit::start_kvik_cluster(env!("CARGO_BIN_EXE_kvik-server"), 3, &[]);
    // A subscriber on the last node; PUBLISH on the first reaches it through forwarding,
    // in publish order.
    let mut sub_con = pubsub_con(nodes[2].port);
    let mut sub = sub_con.as_pubsub();
    sub.subscribe("news").unwrap();
    let mut publisher = kvik_testkit::connect(nodes[0].port);
    let mut pipe = redis::pipe();
    for i in 0..200 {
        pipe.cmd("PUBLISH").arg("news").arg(i);
    }
    // Redis's PUBLISH in a cluster counts the receivers of the node it ran on.
    let local: Vec<i64> = pipe.query(&mut publisher).unwrap();
    assert!(local.iter().all(|&n| n == 0), "{local:?}");
    for i in 0..200 {
        let m = sub.get_message().expect("forwarded message");
        assert_eq!(m.get_payload::<i64>().unwrap(), i);
    }
    drop(sub);

    // Shard channels are keys: the node that does not own the slot answers MOVED, several
    // slots CROSSSLOT; the owner serves SSUBSCRIBE and SPUBLISH.
    let owner = (0..3)
        .find(|&i| {
            let mut c = kvik_testkit::connect(nodes[i].port);
            redis::cmd("SPUBLISH")
                .arg("orders")
                .arg("x")
                .query::<i64>(&mut c)
                .is_ok()
        })
        .expect("one node owns the slot");
    let other = (owner + 1) % 3;
    let mut c = kvik_testkit::connect(nodes[other].port);
    assert!(err(&mut c, &["SPUBLISH", "orders", "x"]).starts_with("MOVED"));
    assert!(err(&mut c, &["SSUBSCRIBE", "orders"]).starts_with("MOVED"));
    let mut o = kvik_testkit::connect(nodes[owner].port);
    assert!(err(&mut o, &["SSUBSCRIBE", "orders", "a-different-slot"]).starts_with("CROSSSLOT"));
    // The redis crate has no SSUBSCRIBE helper: raw RESP.
    let mut raw = kvik_testkit::connect_raw(nodes[owner].port);
    let confirm = b"*3\r\n$10\r\nssubscribe\r\n$6\r\norders\r\n:1\r\n";
    let (got, _) = roundtrip_raw(
        &mut raw,
        &resp_str(&["SSUBSCRIBE", "orders"]),
        confirm.len(),
    );
    assert_eq!(got, confirm);
    assert_eq!(q::<i64>(&mut o, &["SPUBLISH", "orders", "paid"]), 1);
    let expect = b"*3\r\n$8\r\nsmessage\r\n$6\r\norders\r\n$4\r\npaid\r\n";
    assert_eq!(read_raw(&mut raw, expect.len()).0, expect);
    let shard: Vec<String> = q(&mut o, &["PUBSUB", "SHARDCHANNELS"]);
    assert_eq!(shard, ["orders"]);
}

#[test]
fn subscribers_are_not_closed_for_idleness() {
    let s = TestServer::start_with(&["--timeout", "1"]);
    let mut sub_con = pubsub_con(s.port);
    let mut sub = sub_con.as_pubsub();
    sub.subscribe("quiet").unwrap();
    // Longer than `timeout` (idle clients are checked once a second).
    std::thread::sleep(Duration::from_millis(2500));
    let mut publisher = s.client();
    assert_eq!(
        q::<i64>(&mut publisher, &["PUBLISH", "quiet", "still here"]),
        1
    );
    let m = sub.get_message().unwrap();
    assert_eq!(m.get_payload::<String>().unwrap(), "still here");
}
