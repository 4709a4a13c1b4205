//! Cluster mode, server side: CLUSTER replies compared with a real 3-node redis cluster where the
//! shape is deterministic, routing (MOVED, CROSSSLOT, hash tags, ASK / TRYAGAIN / ASKING during
//! SETSLOT MIGRATING / IMPORTING), SETTOPOLOGY version refusal and persistence, the cached
//! CLUSTER SLOTS / SHARDS / NODES replies (next reply after a change, cache off, verify mode).

use crate::common::*;
use kvik_resp::cluster::key_slot;
use kvik_testkit::{kvik_node_id, push_kvik_topology, start_kvik_cluster, KvikServer};
use redis::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kvik-server");

fn cluster(args: &[&str]) -> Vec<KvikServer> {
    start_kvik_cluster(BIN, 3, args)
}

/// A key (with `prefix`) whose slot node `i` of an even 3-way split owns.
fn key_on(i: usize, prefix: &str) -> String {
    let ranges = kvik_resp::topology::even_split(3);
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .find(|k| {
            let s = key_slot(k.as_bytes());
            s >= ranges[i].0 && s <= ranges[i].1
        })
        .unwrap()
}

fn strip_ids(v: &Value) -> Value {
    // Replaces node ids (40-hex bulk strings) and ports so two clusters compare by shape.
    match v {
        Value::Array(items) => Value::Array(items.iter().map(strip_ids).collect()),
        Value::Map(pairs) => Value::Map(
            pairs
                .iter()
                .map(|(k, v)| (strip_ids(k), strip_ids(v)))
                .collect(),
        ),
        Value::BulkString(b) if b.len() == 40 => Value::BulkString(b"ID".to_vec()),
        Value::Int(n) if *n > 16383 => Value::Int(0),
        other => other.clone(),
    }
}

#[test]
fn replies_match_a_redis_cluster() {
    let kvik = cluster(&[]);
    let redis = kvik_testkit::start_redis_cluster();
    let (mut k, mut r) = (kvik[0].client(), redis[0].client());
    let ports_k: Vec<u16> = kvik.iter().map(|n| n.port).collect();
    let ports_r: Vec<u16> = redis.iter().map(|n| n.port).collect();
    // CLUSTER SLOTS: same ranges, same entry shape (host, port, id, empty metadata map).
    let sk = qv(&mut k, &["CLUSTER", "SLOTS"]);
    let sr = qv(&mut r, &["CLUSTER", "SLOTS"]);
    assert_eq!(strip_ids(&sk), strip_ids(&sr), "kvik {sk:?}\nredis {sr:?}");
    // Raw bytes of the first range (ids and ports aside) are identical in RESP2 and RESP3.
    for hello in [&b"2"[..], b"3"] {
        let req = [resp(&[b"HELLO", hello]), resp(&[b"CLUSTER", b"SLOTS"])].concat();
        let norm = |port: u16, ports: &[u16]| {
            let got = raw_until_end(&mut kvik_testkit::connect_raw(port), &req);
            let mut s = String::from_utf8_lossy(&got).into_owned();
            for p in ports {
                s = s.replace(&format!(":{p}\r\n"), ":PORT\r\n");
            }
            let s = s.split("*3\r\n:0\r\n").nth(1).unwrap().to_string();
            s.split("\r\n")
                .map(|l| if l.len() == 40 { "ID" } else { l })
                .collect::<Vec<_>>()
                .join("\r\n")
        };
        assert_eq!(norm(kvik[0].port, &ports_k), norm(redis[0].port, &ports_r));
    }
    // KEYSLOT and its errors.
    for key in [
        "foo",
        "{user1000}.following",
        "foo{}{bar}",
        "foo{{bar}}zap",
        "",
    ] {
        let a: i64 = q(&mut k, &["CLUSTER", "KEYSLOT", key]);
        let b: i64 = q(&mut r, &["CLUSTER", "KEYSLOT", key]);
        assert_eq!(a, b, "{key}");
    }
    for args in [
        &["CLUSTER", "KEYSLOT"][..],
        &["CLUSTER", "COUNTKEYSINSLOT", "16384"],
        &["CLUSTER", "COUNTKEYSINSLOT", "x"],
        &["CLUSTER", "GETKEYSINSLOT", "1", "-1"],
        &["CLUSTER", "SETSLOT", "99999", "STABLE"],
        &["CLUSTER", "SETSLOT", "1", "NODE"],
        &["CLUSTER", "SETSLOT", "1", "MIGRATING", "abc"],
        &["CLUSTER", "SETSLOT", "10000", "MIGRATING", "abc"],
        &["CLUSTER", "SETSLOT", "1", "IMPORTING", "abc"],
        &["CLUSTER", "SETSLOT", "1", "NODE", "abc"],
        &["CLUSTER", "NOSUCH"],
        &["SELECT", "1"],
        &["MGET", "a", "b"],
    ] {
        assert_eq!(err(&mut k, args), err(&mut r, args), "{args:?}");
    }
    let _: () = q(&mut k, &["SELECT", "0"]);
    // COUNTKEYSINSLOT / GETKEYSINSLOT on the owner of a slot.
    let key = key_on(0, "cnt");
    let slot = key_slot(key.as_bytes()).to_string();
    for con in [&mut k, &mut r] {
        let _: () = q(con, &["SET", &key, "v"]);
        let n: i64 = q(con, &["CLUSTER", "COUNTKEYSINSLOT", &slot]);
        assert_eq!(n, 1);
        let keys: Vec<String> = q(con, &["CLUSTER", "GETKEYSINSLOT", &slot, "10"]);
        assert_eq!(keys, vec![key.clone()]);
        let none: Vec<String> = q(con, &["CLUSTER", "GETKEYSINSLOT", &slot, "0"]);
        assert!(none.is_empty());
    }
    // INFO fields that do not depend on gossip.
    let ik: String = q(&mut k, &["CLUSTER", "INFO"]);
    let ir: String = q(&mut r, &["CLUSTER", "INFO"]);
    let fields = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| {
                [
                    "cluster_state",
                    "cluster_slots_",
                    "cluster_known_nodes",
                    "cluster_size",
                ]
                .iter()
                .any(|p| l.starts_with(p))
            })
            .map(String::from)
            .collect()
    };
    assert_eq!(fields(&ik), fields(&ir));
    assert!(ik.ends_with("total_cluster_links_buffer_limit_exceeded:0\r\n"));
    assert_eq!(info_field(&mut k, "cluster", "cluster_enabled"), Some(1));
    // NODES: one line per node with myself flagged, '\n' after each line.
    let nk: String = q(&mut k, &["CLUSTER", "NODES"]);
    assert_eq!(nk.lines().count(), 3);
    assert!(nk.ends_with('\n'));
    let me = kvik_node_id(kvik[0].port);
    let mine = nk.lines().find(|l| l.starts_with(&me)).unwrap();
    let w: Vec<&str> = mine.split(' ').collect();
    assert_eq!(
        w[1],
        format!("127.0.0.1:{}@{}", kvik[0].port, kvik[0].port as u32 + 10000)
    );
    assert_eq!(
        (w[2], w[3], w[7], w[8]),
        ("myself,master", "-", "connected", "0-5460")
    );
    // SHARDS: same structure as Redis's, one shard per node.
    let shk = qv(&mut k, &["CLUSTER", "SHARDS"]);
    let shr = qv(&mut r, &["CLUSTER", "SHARDS"]);
    let (Value::Array(a), Value::Array(b)) = (&shk, &shr) else {
        panic!("{shk:?}")
    };
    assert_eq!(a.len(), b.len());
    let shape = |v: &Value| format!("{:?}", strip_ids(v)).replace(char::is_numeric, "");
    let mut sa: Vec<String> = a.iter().map(shape).collect();
    let mut sb: Vec<String> = b.iter().map(shape).collect();
    sa.sort();
    sb.sort();
    assert_eq!(sa, sb);
}

#[test]
fn routing_moved_crossslot_hash_tags_and_clusterdown() {
    let nodes = cluster(&[]);
    let mut c = nodes[0].client();
    let here = key_on(0, "h");
    let there = key_on(1, "t");
    let _: () = q(&mut c, &["SET", &here, "1"]);
    let slot = key_slot(there.as_bytes());
    assert_eq!(
        err(&mut c, &["GET", &there]),
        format!("MOVED {slot} 127.0.0.1:{}", nodes[1].port)
    );
    assert_eq!(
        err(&mut c, &["MSET", &here, "1", &there, "2"]),
        "CROSSSLOT Keys in request don't hash to the same slot"
    );
    // Hash tags: keys with one tag share a slot (and a node).
    let tag = key_on(0, "tag");
    let (a, b) = (format!("{{{tag}}}:a"), format!("{{{tag}}}:b"));
    let _: () = q(&mut c, &["MSET", &a, "1", &b, "2"]);
    let v: Vec<String> = q(&mut c, &["MGET", &a, &b]);
    assert_eq!(v, vec!["1", "2"]);
    // Keyless commands are never redirected; the RTC path redirects too (a cached key).
    let _: String = q(&mut c, &["PING"]);
    for _ in 0..3 {
        assert!(err(&mut c, &["GET", &there]).starts_with("MOVED"));
        let _: String = q(&mut c, &["GET", &here]);
    }
    assert_eq!(
        err(&mut c, &["SELECT", "1"]),
        "ERR SELECT is not allowed in cluster mode"
    );
    // A topology leaving slots unassigned: CLUSTERDOWN.
    let ids: Vec<String> = nodes.iter().map(|n| kvik_node_id(n.port)).collect();
    let lines = vec![
        format!("{} 127.0.0.1 {} 0-5460", ids[0], nodes[0].port),
        format!("{} 127.0.0.1 {} 5461-10922", ids[1], nodes[1].port),
    ];
    push_kvik_topology(&[nodes[0].port], 2, &lines);
    let far = key_on(2, "f");
    assert_eq!(
        err(&mut c, &["GET", &far]),
        "CLUSTERDOWN Hash slot not served"
    );
    assert_eq!(
        err(&mut c, &["GET", &here]),
        "CLUSTERDOWN The cluster is down"
    );
    let info: String = q(&mut c, &["CLUSTER", "INFO"]);
    assert!(info.starts_with("cluster_state:fail\r\ncluster_slots_assigned:10923\r\n"));
    let _: () = q(
        &mut c,
        &["CONFIG", "SET", "cluster-require-full-coverage", "no"],
    );
    let _: String = q(&mut c, &["GET", &here]);
}

#[test]
fn ask_tryagain_and_asking_during_migration() {
    let nodes = cluster(&[]);
    let ids: Vec<String> = nodes.iter().map(|n| kvik_node_id(n.port)).collect();
    let tag = key_on(0, "mig");
    let slot = key_slot(tag.as_bytes()).to_string();
    let (present, absent) = (format!("{{{tag}}}:p"), format!("{{{tag}}}:a"));
    let mut src = nodes[0].client();
    let mut dst = nodes[1].client();
    let _: () = q(&mut src, &["SET", &present, "v"]);
    let _: () = q(
        &mut dst,
        &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &ids[0]],
    );
    let _: () = q(
        &mut src,
        &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &ids[1]],
    );
    let ask = format!("ASK {slot} 127.0.0.1:{}", nodes[1].port);
    // Source: present keys served, absent ones (reads and writes) asked elsewhere.
    let v: String = q(&mut src, &["GET", &present]);
    assert_eq!(v, "v");
    assert_eq!(err(&mut src, &["GET", &absent]), ask);
    assert_eq!(err(&mut src, &["SET", &absent, "x"]), ask);
    assert_eq!(
        err(&mut src, &["MGET", &absent, &format!("{{{tag}}}:b")]),
        ask
    );
    assert_eq!(
        err(&mut src, &["MGET", &present, &absent]),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    );
    // Target: MOVED without ASKING; ASKING lets exactly one command in.
    let moved = format!("MOVED {slot} 127.0.0.1:{}", nodes[0].port);
    assert_eq!(err(&mut dst, &["GET", &absent]), moved);
    let _: () = q(&mut dst, &["ASKING"]);
    let _: () = q(&mut dst, &["SET", &absent, "new"]);
    assert_eq!(err(&mut dst, &["GET", &absent]), moved);
    let _: () = q(&mut dst, &["ASKING"]);
    assert_eq!(
        err(&mut dst, &["MGET", &absent, &present]),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    );
    // NODES shows the migration state on each side.
    let n: String = q(&mut src, &["CLUSTER", "NODES"]);
    assert!(n.contains(&format!("[{slot}->-{}]", ids[1])), "{n}");
    let n: String = q(&mut dst, &["CLUSTER", "NODES"]);
    assert!(n.contains(&format!("[{slot}-<-{}]", ids[0])), "{n}");
    // SETSLOT NODE refuses while keys remain, then flips the slot locally.
    let _: () = q(&mut src, &["DEL", &present]);
    let _: () = q(&mut src, &["CLUSTER", "SETSLOT", &slot, "NODE", &ids[1]]);
    let _: () = q(&mut dst, &["CLUSTER", "SETSLOT", &slot, "NODE", &ids[1]]);
    assert_eq!(
        err(&mut src, &["GET", &absent]),
        format!("MOVED {slot} 127.0.0.1:{}", nodes[1].port)
    );
    let v: String = q(&mut dst, &["GET", &absent]);
    assert_eq!(v, "new");
    // STABLE clears; errors as Redis's.
    let _: () = q(&mut dst, &["CLUSTER", "SETSLOT", &slot, "STABLE"]);
    let other = key_slot(key_on(2, "o").as_bytes()).to_string();
    assert_eq!(
        err(
            &mut src,
            &["CLUSTER", "SETSLOT", &other, "MIGRATING", &ids[1]]
        ),
        format!("ERR I'm not the owner of hash slot {other}")
    );
}

#[test]
fn settopology_versions_and_persistence() {
    let mut nodes = cluster(&[]);
    let port = nodes[0].port;
    let id = kvik_node_id(port);
    let mut c = nodes[0].client();
    let topo = qv(&mut c, &["CLUSTER", "TOPOLOGY"]);
    let Value::Array(parts) = &topo else {
        panic!("{topo:?}")
    };
    assert_eq!(parts[0], Value::Int(1));
    assert_eq!(
        err(
            &mut c,
            &[
                "CLUSTER",
                "SETTOPOLOGY",
                "1",
                &format!("{id} 127.0.0.1 {port} 0-16383")
            ]
        ),
        "ERR topology version 1 is not newer than the current version 1"
    );
    assert_eq!(
        err(&mut c, &["CLUSTER", "SETTOPOLOGY", "2", "zz 127.0.0.1 1"]),
        "ERR invalid topology: invalid node id 'zz' (40 lowercase hex characters)"
    );
    // Node 0 takes every slot at version 5; it survives a restart, and so does the id.
    let line = format!("{id} 127.0.0.1 {port} 0-16383");
    push_kvik_topology(&[port], 5, std::slice::from_ref(&line));
    let far = key_on(2, "p");
    let _: () = q(&mut c, &["SET", &far, "1"]);
    drop(c);
    nodes[0].restart_same_port();
    let mut c = nodes[0].client();
    assert_eq!(kvik_node_id(nodes[0].port), id);
    let topo = qv(&mut c, &["CLUSTER", "TOPOLOGY"]);
    assert_eq!(
        topo,
        Value::Array(vec![
            Value::Int(5),
            Value::Array(vec![Value::BulkString(line.into_bytes())])
        ])
    );
    let v: String = q(&mut c, &["GET", &far]);
    assert_eq!(v, "1");
    assert_eq!(
        err(&mut c, &["CLUSTER", "SETTOPOLOGY", "4"]),
        "ERR topology version 4 is not newer than the current version 5"
    );
}

#[test]
fn disabled_without_cluster_mode() {
    let s = TestServer::start();
    let mut c = s.client();
    for args in [
        &["CLUSTER", "INFO"][..],
        &["CLUSTER", "SLOTS"],
        &["ASKING"],
        &["READONLY"],
    ] {
        assert_eq!(
            err(&mut c, args),
            "ERR This instance has cluster support disabled"
        );
    }
    assert_eq!(info_field(&mut c, "cluster", "cluster_enabled"), Some(0));
}

/// Sends `req` followed by `PING END` and reads until END's reply.
fn raw_until_end(s: &mut std::net::TcpStream, req: &[u8]) -> Vec<u8> {
    let req = [req, &resp(&[b"PING", b"END"])].concat();
    std::io::Write::write_all(s, &req).unwrap();
    let mut got = Vec::new();
    while !got.ends_with(b"$3\r\nEND\r\n") {
        let (b, closed) = read_raw(s, 1);
        assert!(!closed && !b.is_empty(), "server stopped answering");
        got.extend(b);
    }
    got
}

/// CLUSTER SLOTS, SHARDS and NODES in both protocols and all endpoint kinds, on one connection.
fn all_replies(s: &mut std::net::TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    for kind in ["ip", "hostname", "unknown-endpoint"] {
        let mut req = resp(&[
            b"CONFIG",
            b"SET",
            b"cluster-preferred-endpoint-type",
            kind.as_bytes(),
        ]);
        for p in [b"2", b"3"] {
            req.extend(resp(&[b"HELLO", p]));
            for w in [&b"SLOTS"[..], b"SHARDS", b"NODES"] {
                req.extend(resp(&[b"CLUSTER", w]));
            }
        }
        let got = raw_until_end(s, &req);
        assert!(
            !got.windows(4).any(|w| w == b"-ERR"),
            "{}",
            String::from_utf8_lossy(&got)
        );
        all.extend(got);
    }
    raw_until_end(
        s,
        &resp(&[b"CONFIG", b"SET", b"cluster-preferred-endpoint-type", b"ip"]),
    );
    all
}

#[test]
fn cached_replies_follow_every_change_and_match_fresh_ones() {
    let nodes = cluster(&["--cluster-reply-cache-verify", "yes"]);
    let ids: Vec<String> = nodes.iter().map(|n| kvik_node_id(n.port)).collect();
    let port = nodes[0].port;
    let mut c = nodes[0].client();
    let mut raw = nodes[0].raw();
    // Many topology changes, each followed at once by every reply variant; verify mode panics
    // (an error reply) on any mismatch between a cached and a fresh rendering.
    for v in 2..40u64 {
        let split = (v * 397 % 16000) as u16 + 1;
        let lines = vec![
            format!("{} 127.0.0.1 {} 0-{}", ids[0], nodes[0].port, split - 1),
            format!("{} 127.0.0.1 {} {}-16383", ids[1], nodes[1].port, split),
            format!("{} 127.0.0.1 {}", ids[2], nodes[2].port),
        ];
        push_kvik_topology(&[port], v, &lines);
        // The very next reply shows the change.
        let slots = qv(&mut c, &["CLUSTER", "SLOTS"]);
        let Value::Array(r) = &slots else { panic!() };
        assert_eq!(
            r[0],
            Value::Array(vec![
                Value::Int(0),
                Value::Int(split as i64 - 1),
                Value::Array(vec![
                    Value::BulkString(b"127.0.0.1".to_vec()),
                    Value::Int(nodes[0].port as i64),
                    Value::BulkString(ids[0].clone().into_bytes()),
                    Value::Array(vec![]),
                ]),
            ])
        );
        let first = all_replies(&mut raw);
        assert_eq!(first, all_replies(&mut raw), "cached replies are stable");
        if v % 5 == 0 {
            let s = (split / 2).to_string();
            let _: () = q(&mut c, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &ids[1]]);
            let n: String = q(&mut c, &["CLUSTER", "NODES"]);
            assert!(n.contains(&format!("[{s}->-{}]", ids[1])));
            let _: () = q(&mut c, &["CLUSTER", "SETSLOT", &s, "STABLE"]);
            let n: String = q(&mut c, &["CLUSTER", "NODES"]);
            assert!(!n.contains("->-"));
        }
    }
    // Cache off gives the same bytes as cache on.
    let on = all_replies(&mut raw);
    let _: () = q(&mut c, &["CONFIG", "SET", "cluster-reply-cache", "no"]);
    assert_eq!(all_replies(&mut raw), on);
    // The I/O thread answers SLOTS / SHARDS / NODES itself (counted as run to completion),
    // and with `rtc-read no` a worker gives the same bytes.
    let rtc = |c: &mut redis::Connection| rtc_commands(c);
    let _: () = q(&mut c, &["CONFIG", "SET", "cluster-reply-cache", "yes"]);
    let before = rtc(&mut c);
    for sub in ["SLOTS", "SHARDS", "NODES"] {
        let _: Value = qv(&mut c, &["CLUSTER", sub]);
    }
    assert_eq!(rtc(&mut c) - before, 3);
    let _: () = q(&mut c, &["CONFIG", "SET", "rtc-read", "no"]);
    let before = rtc(&mut c);
    assert_eq!(all_replies(&mut raw), on);
    assert_eq!(rtc(&mut c), before);
}

#[test]
fn cluster_clients_read_and_write_through_moved() {
    let nodes = cluster(&[]);
    // The redis crate's cluster client, seeded with one node only.
    let client = redis::cluster::ClusterClient::builder(vec![nodes[0].url()])
        .connection_timeout(std::time::Duration::from_secs(10))
        .response_timeout(std::time::Duration::from_secs(20))
        .build()
        .unwrap();
    let mut con = client.get_connection().unwrap();
    let keys: Vec<String> = (0..3).map(|i| key_on(i, "cc")).collect();
    for k in &keys {
        redis::cmd("SET")
            .arg(k)
            .arg(format!("v-{k}"))
            .query::<()>(&mut con)
            .unwrap();
    }
    for (i, k) in keys.iter().enumerate() {
        // Each key landed on its owner.
        let v: Option<String> = redis::cmd("GET")
            .arg(k)
            .query(&mut nodes[i].client())
            .unwrap();
        assert_eq!(v, Some(format!("v-{k}")));
    }
    // redis-cli -c follows MOVED from node 0 for writes and reads.
    let k = &keys[2];
    assert_eq!(
        redis_cli(nodes[0].port, &["-c", "SET", k, "cli"]).trim(),
        "OK"
    );
    assert_eq!(redis_cli(nodes[0].port, &["-c", "GET", k]).trim(), "cli");
    assert_eq!(
        redis_cli(nodes[0].port, &["GET", k])
            .trim()
            .split(' ')
            .next(),
        Some("MOVED")
    );
}
