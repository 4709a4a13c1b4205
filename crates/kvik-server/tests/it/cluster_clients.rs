//! Integration tests: unmodified cluster clients against a 3-node kvik cluster, through MOVED
//! (a key on another node) and ASK (a slot half-migrated): the `redis` crate's cluster client,
//! `redis-cli -c`, and redis-py's RedisCluster (from the test virtualenv `make deps` makes; see
//! kvik-testkit's `python`).

use crate::cluster_migration::{cluster_client, kvik_cluster, start_cluster};
use crate::common::*;
use kvik_resp::cluster::key_slot;
use kvik_testkit::KvikServer;

fn myid(n: &KvikServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut n.client())
        .unwrap()
}

/// The full error text of a command that must fail on a plain connection.
fn error_of(n: &KvikServer, args: &[&str]) -> String {
    err(&mut n.client(), args)
}

/// A slot owned by node 0, half migrated to node 1: keys `{tag}:0..20` written, then SETSLOT
/// IMPORTING/MIGRATING and the even-numbered keys moved with MIGRATE. Returns (tag, slot).
fn half_migrated(nodes: &[KvikServer]) -> (String, u16) {
    let tag = (0..)
        .map(|i| format!("tag{i}"))
        .find(|t| key_slot(t.as_bytes()) < 5000)
        .unwrap();
    let slot = key_slot(tag.as_bytes());
    let mut c0 = nodes[0].client();
    for i in 0..20 {
        let _: () = q(
            &mut c0,
            &["SET", &format!("{{{tag}}}:{i}"), &format!("v{i}")],
        );
    }
    let (id0, id1) = (myid(&nodes[0]), myid(&nodes[1]));
    let s = slot.to_string();
    let _: () = q(
        &mut nodes[1].client(),
        &["CLUSTER", "SETSLOT", &s, "IMPORTING", &id0],
    );
    let _: () = q(&mut c0, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &id1]);
    let keys: Vec<String> = (0..20)
        .step_by(2)
        .map(|i| format!("{{{tag}}}:{i}"))
        .collect();
    let port1 = nodes[1].port.to_string();
    let mut args = vec!["MIGRATE", "127.0.0.1", &port1, "", "0", "5000", "KEYS"];
    args.extend(keys.iter().map(String::as_str));
    assert_eq!(q::<String>(&mut c0, &args), "OK");
    (tag, slot)
}

#[test]
fn redis_crate_cluster_client_follows_moved_and_ask() {
    let nodes = start_cluster();
    let mut cc = cluster_client(&nodes);
    // MOVED: keys everywhere, through one client.
    for i in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("k{i}"))
            .arg(i)
            .query(&mut cc)
            .unwrap();
    }
    for i in 0..300 {
        let v: i64 = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut cc)
            .unwrap();
        assert_eq!(v, i);
    }
    let sizes: Vec<i64> = nodes
        .iter()
        .map(|n| q(&mut n.client(), &["DBSIZE"]))
        .collect();
    assert!(sizes.iter().all(|n| *n > 50), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<i64>(), 300);

    // ASK: what a plain client sees, then what the cluster client does with it.
    let (tag, slot) = half_migrated(&nodes);
    let (p0, p1) = (nodes[0].port, nodes[1].port);
    let moved_key = format!("{{{tag}}}:0");
    let kept_key = format!("{{{tag}}}:1");
    assert_eq!(
        error_of(&nodes[0], &["GET", &moved_key]),
        format!("ASK {slot} 127.0.0.1:{p1}")
    );
    assert_eq!(
        q::<String>(&mut nodes[0].client(), &["GET", &kept_key]),
        "v1"
    );
    assert_eq!(
        error_of(&nodes[0], &["MGET", &kept_key, &moved_key]),
        "TRYAGAIN Multiple keys request during rehashing of slot"
    );
    assert_eq!(
        error_of(&nodes[1], &["GET", &moved_key]),
        format!("MOVED {slot} 127.0.0.1:{p0}"),
        "importing, but not asked"
    );
    for i in 0..20 {
        let v: String = redis::cmd("GET")
            .arg(format!("{{{tag}}}:{i}"))
            .query(&mut cc)
            .unwrap();
        assert_eq!(v, format!("v{i}"));
    }
    // A new key of the migrating slot goes to the target (ASK then ASKING + SET).
    let _: () = redis::cmd("SET")
        .arg(format!("{{{tag}}}:new"))
        .arg("n")
        .query(&mut cc)
        .unwrap();
    let on1: i64 = q(
        &mut nodes[1].client(),
        &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
    );
    assert_eq!(on1, 11);

    // Finish the move with the admin tool; the client follows MOVED to the new owner.
    let (code, out) = kvik_cluster(&[
        "move-slots",
        "--from",
        &nodes[0].addr(),
        "--to",
        &nodes[1].addr(),
        "--slots",
        &slot.to_string(),
        &nodes[0].addr(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        error_of(&nodes[0], &["GET", &kept_key]),
        format!("MOVED {slot} 127.0.0.1:{p1}")
    );
    for i in 0..20 {
        let v: String = redis::cmd("GET")
            .arg(format!("{{{tag}}}:{i}"))
            .query(&mut cc)
            .unwrap();
        assert_eq!(v, format!("v{i}"));
    }
    let counts: Vec<i64> = nodes
        .iter()
        .map(|n| {
            q(
                &mut n.client(),
                &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
            )
        })
        .collect();
    assert_eq!(counts, vec![0, 21, 0]);
}

#[test]
fn redis_cli_follows_moved_and_ask() {
    let nodes = start_cluster();
    let key = (0..)
        .map(|i| format!("cli{i}"))
        .find(|k| key_slot(k.as_bytes()) < 5000)
        .unwrap();
    // Owned by node 0, asked on node 2: redis-cli -c follows MOVED.
    assert_eq!(
        redis_cli(nodes[2].port, &["-c", "SET", &key, "hello"]).trim(),
        "OK"
    );
    assert_eq!(
        redis_cli(nodes[1].port, &["-c", "GET", &key]).trim(),
        "hello"
    );
    assert_eq!(q::<String>(&mut nodes[0].client(), &["GET", &key]), "hello");
    // Without -c it only reports the redirect.
    let plain = redis_cli(nodes[1].port, &["GET", &key]);
    assert!(
        plain.contains(&format!("MOVED {}", key_slot(key.as_bytes()))),
        "{plain}"
    );
    // ASK: a moved key of a half-migrated slot, read from the source.
    let (tag, _) = half_migrated(&nodes);
    for i in [0, 1, 2, 3] {
        let out = redis_cli(nodes[0].port, &["-c", "GET", &format!("{{{tag}}}:{i}")]);
        assert_eq!(out.trim(), format!("v{i}"));
    }
    let out = redis_cli(
        nodes[2].port,
        &["-c", "SET", &format!("{{{tag}}}:new"), "x"],
    );
    assert_eq!(out.trim(), "OK");
    let mut c1 = nodes[1].client();
    let _: () = q(&mut c1, &["ASKING"]);
    let v: String = q(&mut c1, &["GET", &format!("{{{tag}}}:new")]);
    assert_eq!(v, "x", "the new key went to the importing node");
}

const PY_CLIENT: &str = r#"
import sys
from redis.cluster import RedisCluster
host, port, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rc = RedisCluster(host=host, port=port, socket_timeout=20, socket_connect_timeout=10)
for i in range(200):
    rc.set(f"py{i}", i)
for i in range(200):
    assert rc.get(f"py{i}") == str(i).encode(), i
for i in range(20):
    assert rc.get(f"{{{tag}}}:{i}") == f"v{i}".encode(), i
rc.set(f"{{{tag}}}:py", "from-python")
assert rc.get(f"{{{tag}}}:py") == b"from-python"
print("PYTHON-CLUSTER-OK")
"#;

#[test]
fn redis_py_cluster_follows_moved_and_ask() {
    // Fails (or skips) before the cluster starts when the virtualenv is missing.
    if kvik_testkit::python().is_none() {
        return;
    }
    let nodes = start_cluster();
    let (tag, slot) = half_migrated(&nodes);
    let port = nodes[2].port.to_string();
    let Some(out) = kvik_testkit::run_python(PY_CLIENT, &["127.0.0.1", &port, &tag]) else {
        return;
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("PYTHON-CLUSTER-OK"),
        "{text}"
    );
    let on1: i64 = q(
        &mut nodes[1].client(),
        &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()],
    );
    assert_eq!(on1, 11, "redis-py's new key went to the importing node");
    let total: i64 = nodes
        .iter()
        .map(|n| q::<i64>(&mut n.client(), &["DBSIZE"]))
        .sum();
    assert_eq!(total, 200 + 21);
}
