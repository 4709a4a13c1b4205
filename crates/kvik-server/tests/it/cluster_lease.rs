//! Integration tests: the write lease (`cluster-write-lease-ms`) of a cluster primary, without
//! a controller. A primary whose replicas echo its PING stamps keeps writing; with its replica
//! gone and no renewal it refuses writes with CLUSTERDOWN (reads go on); `CLUSTER RENEWLEASE`
//! renews it from a reading of the node's clock, and a late renewal from an old reading renews
//! nothing; a primary without replicas is never fenced; the setting at 0 turns it off. The
//! controller's side (failover, split brain) is tested in kvik-controller's tests.

use crate::cluster_migration::kvik_cluster;
use crate::common::{eventually, q, Endpoint};
use kvik_resp::cluster::key_slot;
use kvik_testkit::KvikServer;
use redis::Connection;
use std::time::Duration;

const LEASE_MS: &str = "2000";

/// A key primary `i` of the even 3-node split owns.
fn key_on(i: usize) -> String {
    let (a, b) = kvik_resp::topology::even_split(3)[i];
    (0..)
        .map(|n| format!("k{n}"))
        .find(|k| (a..=b).contains(&key_slot(k.as_bytes())))
        .unwrap()
}

/// SET's answer: "OK" or the error's code.
fn set(con: &mut Connection, key: &str) -> String {
    match redis::cmd("SET").arg(key).arg("v").query::<String>(con) {
        Ok(ok) => ok,
        Err(e) => e.code().unwrap_or("?").to_string(),
    }
}

fn lease_state(con: &mut Connection) -> String {
    let info: String = q(con, &["INFO", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix("kvik_write_lease:"))
        .unwrap_or("")
        .trim()
        .to_string()
}

#[test]
fn a_primary_writes_only_while_its_lease_is_renewed() {
    let bin = env!("CARGO_BIN_EXE_kvik-server");
    let args = ["--cluster-write-lease-ms", LEASE_MS];
    let nodes = kvik_testkit::start_kvik_cluster(bin, 3, &args);
    let mut replica = KvikServer::start(bin, &["--cluster-enabled", "yes", args[0], args[1]]);
    let (code, out) = kvik_cluster(&["add-replica", &replica.addr(), &nodes[0].addr()]);
    assert_eq!(code, 0, "{out}");
    let (key, other) = (key_on(0), key_on(1));
    let mut p = nodes[0].client();
    let mut alone = nodes[1].client();

    // The replica's echoes renew the primary; a primary without replicas needs no renewal.
    assert!(
        eventually(Duration::from_secs(30), || set(&mut p, &key) == "OK"),
        "the primary never wrote on its replica's echoes: {}",
        set(&mut p, &key)
    );
    assert_eq!(lease_state(&mut p), "valid");
    assert!(eventually(Duration::from_secs(30), || set(
        &mut alone, &other
    ) == "OK"));

    // No replica and no controller: fenced, reads go on, and the error says why.
    replica.kill9();
    assert!(
        eventually(Duration::from_secs(30), || set(&mut p, &key)
            == "CLUSTERDOWN"),
        "the primary kept writing without any renewal"
    );
    assert_eq!(lease_state(&mut p), "expired");
    let e = redis::cmd("SET")
        .arg(&key)
        .arg("v")
        .query::<()>(&mut p)
        .unwrap_err();
    assert!(e.to_string().contains("write lease expired"), "{e}");
    let v: Option<String> = q(&mut p, &["GET", &key]);
    assert_eq!(v.as_deref(), Some("v"));
    let script = redis::cmd("EVAL")
        .arg("return redis.call('SET', KEYS[1], 'w')")
        .arg(1)
        .arg(&key)
        .query::<String>(&mut p)
        .unwrap_err();
    assert!(
        script.to_string().contains("write lease expired"),
        "{script}"
    );
    assert_eq!(
        set(&mut alone, &other),
        "OK",
        "a primary without replicas is not fenced"
    );

    // The controller's two-step renewal: a reading of the clock, then a renewal from it.
    let stamp: u64 = q(&mut p, &["CLUSTER", "RENEWLEASE"]);
    let _: () = q(&mut p, &["CLUSTER", "RENEWLEASE", &stamp.to_string()]);
    assert_eq!(set(&mut p, &key), "OK", "renewed");
    let future = (stamp + 3_600_000).to_string();
    let e = redis::cmd("CLUSTER")
        .arg("RENEWLEASE")
        .arg(&future)
        .query::<()>(&mut p)
        .unwrap_err();
    assert!(e.to_string().contains("not one of this node's"), "{e}");

    // A renewal from a reading older than the lease renews nothing.
    assert!(eventually(Duration::from_secs(30), || set(&mut p, &key)
        == "CLUSTERDOWN"));
    let _: () = q(&mut p, &["CLUSTER", "RENEWLEASE", &stamp.to_string()]);
    assert_eq!(
        set(&mut p, &key),
        "CLUSTERDOWN",
        "an old reading renewed the lease"
    );

    // Off: today's behaviour.
    let _: () = q(&mut p, &["CONFIG", "SET", "cluster-write-lease-ms", "0"]);
    assert_eq!(set(&mut p, &key), "OK");
    assert_eq!(lease_state(&mut p), "off");
}
