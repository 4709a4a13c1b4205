//! Integration tests: replicas in cluster mode. A 3-primary kvik cluster gets replicas with
//! `kvik-cluster add-replica`; the tests check the replies that list them (CLUSTER SLOTS /
//! SHARDS / NODES in Redis 7.0's shapes), replica routing (MOVED to the primary, READONLY
//! reads), a replica converging under load, and `kvik-cluster failover` followed by real
//! cluster clients (the `redis` crate's and redis-py's RedisCluster), coordinated with the
//! primary alive and forced with it killed. Every wait is bounded.

use crate::cluster_migration::{cluster_client, kvik_cluster, start_cluster};
use crate::common::{err, eventually, q, Endpoint};
use crate::replication::{dataset, CONVERGE};
use kvik_resp::cluster::key_slot;
use kvik_testkit::KvikServer;
use redis::{Connection, Value};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn new_node() -> KvikServer {
    KvikServer::start(
        env!("CARGO_BIN_EXE_kvik-server"),
        &["--cluster-enabled", "yes"],
    )
}

fn myid(n: &KvikServer) -> String {
    q(&mut n.client(), &["CLUSTER", "MYID"])
}

/// `kvik-cluster add-replica replica primary`, which must succeed (it waits for the sync).
fn add_replica(replica: &KvikServer, primary: &KvikServer) {
    let (code, out) = kvik_cluster(&["add-replica", &replica.addr(), &primary.addr()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("is in sync"), "{out}");
}

/// A key (with a hash tag, so derived keys share its slot) owned by primary `i` of an even
/// 3-node split.
fn tag_on(i: usize, prefix: &str) -> String {
    let ranges = kvik_resp::topology::even_split(3);
    let (a, b) = ranges[i];
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .find(|t| (a..=b).contains(&key_slot(t.as_bytes())))
        .unwrap()
}

/// ROLE's first element and, for a replica, the primary's port and link state.
fn role(n: &KvikServer) -> (String, i64, String) {
    let v: Vec<Value> = q(&mut n.client(), &["ROLE"]);
    let text = |i: usize| -> String { redis::from_redis_value(&v[i]).unwrap() };
    match text(0).as_str() {
        "slave" => (
            "slave".into(),
            redis::from_redis_value(&v[2]).unwrap(),
            text(3),
        ),
        other => (other.into(), 0, String::new()),
    }
}

/// Waits until the replica (read with READONLY) holds exactly the primary's dataset.
fn converged(primary: &KvikServer, replica: &KvikServer) {
    let mut p = primary.client();
    let mut r = replica.client();
    let _: () = q(&mut r, &["READONLY"]);
    let mut last = (0, 0);
    let same = eventually(CONVERGE, || {
        let (a, b) = (dataset(&mut p), dataset(&mut r));
        last = (a.len(), b.len());
        a == b
    });
    assert!(same, "replica did not converge: {last:?} keys");
}

/// A pipelined write load over several types on keys tagged `{tag}` (one slot).
fn tagged_load(con: &mut Connection, tag: &str, round: usize) {
    let mut p = redis::pipe();
    for i in 0..100 {
        let n = round * 1000 + i;
        p.cmd("SET")
            .arg(format!("{{{tag}}}s{}", i % 30))
            .arg(n)
            .ignore();
        p.cmd("HSET")
            .arg(format!("{{{tag}}}h{}", i % 5))
            .arg(format!("f{}", i % 11))
            .arg(n)
            .ignore();
        p.cmd("RPUSH")
            .arg(format!("{{{tag}}}l{}", i % 3))
            .arg(n)
            .ignore();
        p.cmd("SADD")
            .arg(format!("{{{tag}}}set"))
            .arg(i % 40)
            .ignore();
        p.cmd("ZADD")
            .arg(format!("{{{tag}}}z"))
            .arg(n)
            .arg(format!("m{}", i % 25))
            .ignore();
        if i % 10 == 0 {
            p.cmd("DEL").arg(format!("{{{tag}}}l{}", i % 3)).ignore();
        }
    }
    p.query::<()>(con).unwrap();
}

#[test]
fn replicas_are_listed_in_redis_shapes_and_serve_readonly_reads() {
    let nodes = start_cluster();
    let replica = new_node();
    add_replica(&replica, &nodes[0]);
    let (code, out) = kvik_cluster(&["check", &nodes[1].addr()]);
    assert_eq!(code, 0, "check verifies the replica's ROLE: {out}");
    let (code, out) = kvik_cluster(&["show", &nodes[1].addr()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("{} replica of ", replica.addr())),
        "{out}"
    );
    let (pid, rid) = (myid(&nodes[0]), myid(&replica));
    let (pport, rport) = (nodes[0].port as i64, replica.port as i64);

    // CLUSTER SLOTS: the replica after its primary in the primary's range.
    let slots: Vec<Value> = q(&mut nodes[1].client(), &["CLUSTER", "SLOTS"]);
    assert_eq!(slots.len(), 3);
    let first: Vec<Value> = redis::from_redis_value(&slots[0]).unwrap();
    assert_eq!(first.len(), 4, "start, end, primary, replica");
    let node = |v: &Value| -> (String, i64, String) {
        let parts: Vec<Value> = redis::from_redis_value(v).unwrap();
        (
            redis::from_redis_value(&parts[0]).unwrap(),
            redis::from_redis_value(&parts[1]).unwrap(),
            redis::from_redis_value(&parts[2]).unwrap(),
        )
    };
    assert_eq!(node(&first[2]), ("127.0.0.1".into(), pport, pid.clone()));
    assert_eq!(node(&first[3]), ("127.0.0.1".into(), rport, rid.clone()));
    for other in &slots[1..] {
        let r: Vec<Value> = redis::from_redis_value(other).unwrap();
        assert_eq!(r.len(), 3, "no replicas");
    }

    // CLUSTER SHARDS: three shards; the first has the primary and the replica.
    let shards: Vec<Value> = q(&mut nodes[2].client(), &["CLUSTER", "SHARDS"]);
    assert_eq!(shards.len(), 3);
    let shard: BTreeMap<String, Value> = redis::from_redis_value(&shards[0]).unwrap();
    let members: Vec<BTreeMap<String, Value>> = redis::from_redis_value(&shard["nodes"]).unwrap();
    let roles: Vec<(String, String)> = members
        .iter()
        .map(|m| {
            (
                redis::from_redis_value(&m["id"]).unwrap(),
                redis::from_redis_value(&m["role"]).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        roles,
        vec![
            (pid.clone(), "master".into()),
            (rid.clone(), "replica".into())
        ]
    );
    for m in &members {
        assert!(m.contains_key("replication-offset") && m.contains_key("health"));
    }

    // CLUSTER NODES: "slave <primary-id>", and "myself,slave" on the replica itself.
    let text: String = q(&mut replica.client(), &["CLUSTER", "NODES"]);
    let line = text.lines().find(|l| l.starts_with(&rid)).unwrap();
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(&words[2..4], &["myself,slave", pid.as_str()], "{line}");
    assert_eq!(words.len(), 8, "a replica line lists no slots: {line}");
    let text: String = q(&mut nodes[0].client(), &["CLUSTER", "NODES"]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&rid) && l.contains(&format!(" slave {pid} "))),
        "{text}"
    );

    // CLUSTER REPLICAS / SLAVES: the replicas' CLUSTER NODES lines.
    let lines: Vec<String> = q(&mut nodes[2].client(), &["CLUSTER", "REPLICAS", &pid]);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with(&format!("{rid} 127.0.0.1:{rport}@")),
        "{lines:?}"
    );
    assert!(lines[0].contains(&format!(" slave {pid} ")) && !lines[0].ends_with('\n'));
    let same: Vec<String> = q(&mut nodes[2].client(), &["CLUSTER", "SLAVES", &pid]);
    assert_eq!(same, lines);
    let none: Vec<String> = q(
        &mut nodes[2].client(),
        &["CLUSTER", "REPLICAS", &myid(&nodes[1])],
    );
    assert!(none.is_empty());
    assert_eq!(
        err(&mut nodes[2].client(), &["CLUSTER", "REPLICAS", &rid]),
        "ERR The specified node is not a master"
    );
    assert_eq!(
        err(&mut nodes[2].client(), &["CLUSTER", "REPLICAS", "12"]),
        "ERR Unknown node 12"
    );

    // Routing on the replica: MOVED to the primary for writes, and for reads until READONLY.
    let key = format!("{{{}}}k", tag_on(0, "r"));
    let slot = key_slot(key.as_bytes());
    let _: () = q(&mut nodes[0].client(), &["SET", &key, "v1"]);
    let moved = format!("MOVED {slot} 127.0.0.1:{pport}");
    let mut rc = replica.client();
    assert_eq!(err(&mut rc, &["GET", &key]), moved);
    assert_eq!(err(&mut rc, &["SET", &key, "x"]), moved);
    let _: () = q(&mut rc, &["READONLY"]);
    assert!(eventually(CONVERGE, || {
        q::<Option<String>>(&mut rc, &["GET", &key]).as_deref() == Some("v1")
    }));
    assert_eq!(
        err(&mut rc, &["SET", &key, "x"]),
        moved,
        "writes stay MOVED"
    );
    let elsewhere = tag_on(1, "e");
    let owner = nodes[1].port;
    assert_eq!(
        err(&mut rc, &["GET", &elsewhere]),
        format!("MOVED {} 127.0.0.1:{owner}", key_slot(elsewhere.as_bytes())),
        "another shard's slot"
    );
    let _: () = q(&mut rc, &["READWRITE"]);
    assert_eq!(err(&mut rc, &["GET", &key]), moved);
    // Keyless writes on a replica: READONLY, as a standalone replica.
    assert!(err(&mut rc, &["FLUSHALL"]).starts_with("READONLY"));
    // The topology sets the roles: REPLICAOF and FAILOVER are refused, as in Redis Cluster.
    assert_eq!(
        err(&mut rc, &["REPLICAOF", "NO", "ONE"]),
        "ERR REPLICAOF not allowed in cluster mode."
    );
    assert_eq!(
        err(&mut nodes[0].client(), &["FAILOVER"]),
        "ERR FAILOVER not allowed in cluster mode."
    );
    assert_eq!(role(&replica), ("slave".into(), pport, "connected".into()));

    // The `redis` crate's cluster client reads from the replica with read_from_replicas.
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let mut cc = redis::cluster::ClusterClient::builder(urls)
        .read_from_replicas()
        .connection_timeout(Duration::from_secs(10))
        .response_timeout(Duration::from_secs(20))
        .build()
        .unwrap()
        .get_connection()
        .unwrap();
    let before = get_calls(&replica);
    for _ in 0..20 {
        let v: String = redis::cmd("GET").arg(&key).query(&mut cc).unwrap();
        assert_eq!(v, "v1");
    }
    assert!(get_calls(&replica) > before, "reads went to the replica");

    // A replica converges under a write load (dataset compare).
    let tag = tag_on(0, "load");
    let mut pc = nodes[0].client();
    for round in 0..20 {
        tagged_load(&mut pc, &tag, round);
    }
    converged(&nodes[0], &replica);

    // The topology survives a restart of the replica: it follows its primary again and
    // resumes from its own position (no second full sync).
    assert_eq!(full_syncs(&nodes[0]), 1, "add-replica's first sync");
    let mut replica = replica;
    replica.restart_same_port();
    assert!(eventually(CONVERGE, || role(&replica).2 == "connected"));
    tagged_load(&mut pc, &tag, 99);
    converged(&nodes[0], &replica);
    assert_eq!(
        full_syncs(&nodes[0]),
        1,
        "the restarted replica resumed incrementally"
    );

    // remove-node: a removed replica stops following.
    let (code, out) = kvik_cluster(&["remove-node", &replica.addr(), &nodes[0].addr()]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(role(&replica).0, "master");
}

/// A writer through the `redis` crate's cluster client: SET w<i> i for i = 0, 1, ... until
/// stopped, each retried (as applications do) until acknowledged. Returns how many were.
fn spawn_writer(
    nodes: &[KvikServer],
    stop: Arc<AtomicBool>,
    acked: Arc<AtomicU64>,
) -> std::thread::JoinHandle<u64> {
    let mut cc = cluster_client(nodes);
    std::thread::spawn(move || {
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let mut tries = 0;
            loop {
                let r: redis::RedisResult<()> =
                    redis::cmd("SET").arg(format!("w{i}")).arg(i).query(&mut cc);
                match r {
                    Ok(()) => break,
                    Err(e) => {
                        tries += 1;
                        assert!(tries < 200, "write w{i} kept failing: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
            }
            i += 1;
            acked.store(i, Ordering::Relaxed);
        }
        i
    })
}

/// Checks that w0..w<n> all read back through a cluster client with their values.
fn all_writes_present(nodes: &[KvikServer], n: u64) {
    let mut cc = cluster_client(nodes);
    for i in 0..n {
        let v: Option<u64> = redis::cmd("GET")
            .arg(format!("w{i}"))
            .query(&mut cc)
            .unwrap();
        assert_eq!(v, Some(i), "acknowledged write w{i} of {n}");
    }
}

#[test]
fn failover_under_load_with_the_redis_crate_cluster_client() {
    let nodes = start_cluster();
    let replica = new_node();
    add_replica(&replica, &nodes[0]);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let writer = spawn_writer(&nodes, stop.clone(), acked.clone());
    assert!(eventually(CONVERGE, || acked.load(Ordering::Relaxed) > 300));

    let (code, out) = kvik_cluster(&["failover", &replica.addr()]);
    assert_eq!(code, 0, "{out}");
    print!("{out}");
    let after = acked.load(Ordering::Relaxed);
    assert!(eventually(CONVERGE, || acked.load(Ordering::Relaxed) > after + 300));
    stop.store(true, Ordering::Relaxed);
    let n = writer.join().unwrap();
    println!("{n} writes acknowledged, {after} before the failover finished");

    // Roles swapped: the old primary follows the new one and redirects to it.
    assert_eq!(role(&replica).0, "master");
    assert!(eventually(CONVERGE, || role(&nodes[0])
        == ("slave".into(), replica.port as i64, "connected".into())));
    let key = format!("{{{}}}k", tag_on(0, "f"));
    assert_eq!(
        err(&mut nodes[0].client(), &["SET", &key, "x"]),
        format!(
            "MOVED {} 127.0.0.1:{}",
            key_slot(key.as_bytes()),
            replica.port
        )
    );
    let text: String = q(&mut nodes[1].client(), &["CLUSTER", "NODES"]);
    let old = myid(&nodes[0]);
    assert!(
        text.lines()
            .any(|l| l.starts_with(&old) && l.contains(&format!(" slave {} ", myid(&replica)))),
        "{text}"
    );
    all_writes_present(&nodes, n);
    // The old primary, now a replica, holds the same data: it had not diverged (the replica
    // had caught up while writes were paused), so it continued without a full sync.
    converged(&replica, &nodes[0]);
    assert_eq!(full_syncs(&replica), 0);
}

#[test]
fn forced_failover_after_the_primary_is_killed_and_its_return_as_a_replica() {
    let mut nodes = start_cluster();
    let replica = new_node();
    add_replica(&replica, &nodes[0]);
    // Writes on the primary's slots acknowledged by WAIT 1 must survive.
    let tag = tag_on(0, "k");
    let mut pc = nodes[0].client();
    for i in 0..200 {
        let _: () = q(&mut pc, &["SET", &format!("{{{tag}}}{i}"), &i.to_string()]);
    }
    let n: i64 = q(&mut pc, &["WAIT", "1", "5000"]);
    assert_eq!(n, 1);
    nodes[0].kill9();

    let (code, out) = kvik_cluster(&["failover", &replica.addr()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("--force"), "{out}");
    let (code, out) = kvik_cluster(&["failover", "--force", &replica.addr()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("sync"), "{out}");
    assert_eq!(role(&replica).0, "master");
    let mut rc = replica.client();
    for i in 0..200 {
        let v: String = q(&mut rc, &["GET", &format!("{{{tag}}}{i}")]);
        assert_eq!(v, i.to_string());
    }
    // Cluster clients write to the shard again (seeded with the live nodes).
    let live = [&nodes[1], &nodes[2], &replica];
    let urls: Vec<String> = live.iter().map(|n| n.url()).collect();
    let mut cc = redis::cluster::ClusterClient::builder(urls)
        .connection_timeout(Duration::from_secs(10))
        .response_timeout(Duration::from_secs(20))
        .retries(30)
        .build()
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("{{{tag}}}after"))
        .arg("yes")
        .query(&mut cc)
        .unwrap();

    // The old primary comes back with its old topology, takes a write nobody replicated, then
    // `sync` makes it a replica of the new primary: the diverged write is dropped.
    nodes[0].restart_same_port();
    let diverged = format!("{{{tag}}}diverged");
    let _: () = q(&mut nodes[0].client(), &["SET", &diverged, "lost"]);
    let (code, out) = kvik_cluster(&["sync", &replica.addr()]);
    assert_eq!(code, 0, "{out}");
    assert!(eventually(CONVERGE, || role(&nodes[0])
        == ("slave".into(), replica.port as i64, "connected".into())));
    converged(&replica, &nodes[0]);
    let mut oc = nodes[0].client();
    let _: () = q(&mut oc, &["READONLY"]);
    assert_eq!(q::<Option<String>>(&mut oc, &["GET", &diverged]), None);
    assert_eq!(
        full_syncs(&replica),
        1,
        "the diverged old primary took one full sync"
    );
    assert_eq!(
        q::<Option<String>>(&mut oc, &["GET", &format!("{{{tag}}}after")]).as_deref(),
        Some("yes")
    );
}

/// redis-py RedisCluster: writes with retries (as applications do around a failover) until the
/// stop file exists, then reads everything back with `read_from_replicas=True`.
const PY_WRITER: &str = r#"
import os, sys, time
from redis.cluster import RedisCluster
from redis.exceptions import RedisError
host, port, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rc = RedisCluster(host=host, port=port, socket_timeout=20, socket_connect_timeout=10)
i = 0
while not os.path.exists(stop):
    for attempt in range(200):
        try:
            rc.set(f"py{i}", i)
            break
        except RedisError as e:
            time.sleep(0.05)
    else:
        raise SystemExit(f"py{i} kept failing")
    i += 1
    if i % 100 == 0:
        print(f"ACKED {i}", flush=True)
print(f"DONE {i}", flush=True)
"#;

const PY_READER: &str = r#"
import sys
from redis.cluster import RedisCluster
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rc = RedisCluster(host=host, port=port, read_from_replicas=True,
                  socket_timeout=20, socket_connect_timeout=10)
for i in range(n):
    assert rc.get(f"py{i}") == str(i).encode(), i
print("PY-READ-OK")
"#;

#[test]
fn redis_py_writes_through_a_failover_and_reads_from_replicas() {
    let Some(python) = kvik_testkit::python() else {
        return;
    };
    let nodes = start_cluster();
    let replicas: Vec<KvikServer> = (0..3).map(|_| new_node()).collect();
    for (r, p) in replicas.iter().zip(&nodes) {
        add_replica(r, p);
    }
    let dir = tempfile::tempdir().unwrap();
    let stop = dir.path().join("stop");
    let port = nodes[1].port.to_string();
    let child = std::process::Command::new("timeout")
        .arg("120")
        .arg(&python)
        .arg("-c")
        .arg(PY_WRITER)
        .args(["127.0.0.1", &port, stop.to_str().unwrap()])
        .env("PYTHONNOUSERSITE", "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let count = |n: &KvikServer| q::<i64>(&mut n.client(), &["DBSIZE"]);
    assert!(eventually(CONVERGE, || count(&nodes[0]) > 100));
    let (code, out) = kvik_cluster(&["failover", &replicas[0].addr()]);
    assert_eq!(code, 0, "{out}");
    let before = count(&replicas[0]);
    assert!(eventually(CONVERGE, || count(&replicas[0]) > before + 100));
    std::fs::write(&stop, b"").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let n: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("DONE "))
        .unwrap()
        .parse()
        .unwrap();
    println!("redis-py: {n} writes acknowledged across the failover");

    // Every replica caught up, then redis-py reads everything with read_from_replicas.
    converged(&replicas[0], &nodes[0]);
    converged(&nodes[1], &replicas[1]);
    converged(&nodes[2], &replicas[2]);
    let reads_before: Vec<u64> = [&nodes[0], &replicas[1], &replicas[2]]
        .iter()
        .map(|r| get_calls(r))
        .collect();
    let out =
        kvik_testkit::python_stdout(PY_READER, &["127.0.0.1", &port, &n.to_string()]).unwrap();
    assert!(out.contains("PY-READ-OK"), "{out}");
    let reads_after: Vec<u64> = [&nodes[0], &replicas[1], &replicas[2]]
        .iter()
        .map(|r| get_calls(r))
        .collect();
    assert!(
        reads_before.iter().zip(&reads_after).any(|(a, b)| b > a),
        "no GET reached a replica: {reads_before:?} -> {reads_after:?}"
    );
}

/// `cmdstat_get` calls on a node.
fn get_calls(n: &KvikServer) -> u64 {
    let text: String = q(&mut n.client(), &["INFO", "commandstats"]);
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_get:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Full syncs a node served as a primary (INFO stats `sync_full`).
fn full_syncs(n: &KvikServer) -> u64 {
    crate::common::info_field(&mut n.client(), "stats", "sync_full").unwrap()
}

/// A hash tag whose slot is below `end`.
fn tag_below(end: u16, prefix: &str) -> String {
    (0..)
        .map(|n| format!("{prefix}{n}"))
        .find(|t| key_slot(t.as_bytes()) < end)
        .unwrap()
}

#[test]
fn replicas_converge_through_a_slot_migration() {
    let nodes = start_cluster();
    let (r0, r1) = (new_node(), new_node());
    add_replica(&r0, &nodes[0]);
    add_replica(&r1, &nodes[1]);
    let (mut c0, mut c1) = (nodes[0].client(), nodes[1].client());
    let moving = [tag_below(200, "mv"), tag_below(200, "mw")];
    for (round, tag) in moving.iter().enumerate() {
        tagged_load(&mut c0, tag, round);
    }
    tagged_load(&mut c0, &tag_on(0, "stay"), 0);
    tagged_load(&mut c1, &tag_on(1, "there"), 0);
    let (from, to) = (nodes[0].addr(), nodes[1].addr());
    let (code, out) = kvik_cluster(&[
        "move-slots",
        "--from",
        &from,
        "--to",
        &to,
        "--slots",
        "0-199",
        "--batch",
        "40",
        &from,
    ]);
    assert_eq!(code, 0, "{out}");
    // The moved keys left the source and its replica, and reached the target and its replica.
    converged(&nodes[0], &r0);
    converged(&nodes[1], &r1);
    let mut r1c = r1.client();
    let _: () = q(&mut r1c, &["READONLY"]);
    let mut r0c = r0.client();
    let _: () = q(&mut r0c, &["READONLY"]);
    let left = dataset(&mut r0c);
    for tag in &moving {
        let v: Option<String> = q(&mut r1c, &["GET", &format!("{{{tag}}}s0")]);
        assert!(v.is_some(), "{tag} on the target's replica");
        let tagged = format!("{{{tag}}}");
        assert!(
            !left.keys().any(|k| k.starts_with(&tagged)),
            "{tag} still on the source's replica"
        );
    }
    // Writes after the move follow the slot to its new owner and its replica.
    tagged_load(&mut c1, &moving[0], 5);
    converged(&nodes[1], &r1);
}
