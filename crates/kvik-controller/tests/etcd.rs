//! The etcd layer against a real etcd on loopback: the record changes only by compare-and-swap,
//! one candidate at a time wins the leader key, and a leader whose lease is gone stops counting
//! as leader and can no longer write the record. Every wait is bounded.

use kvik_controller::etcd::Etcd;
use kvik_controller::leader::{campaign, Campaign};
use kvik_controller::record::{self, Keys};
use kvik_resp::topology::Topology;
use kvik_testkit::{eventually, EtcdServer};
use std::time::Duration;

fn topology(version: u64) -> Topology {
    let id = "a".repeat(40);
    Topology::from_lines(version, &[format!("{id} 127.0.0.1 7000 0-16383")]).unwrap()
}

fn client(etcd: &EtcdServer) -> Etcd {
    Etcd::new(&etcd.addr(), Duration::from_secs(5))
}

#[test]
fn the_record_changes_only_by_compare_and_swap() {
    let server = EtcdServer::start();
    let etcd = client(&server);
    let keys = Keys::new("cas");
    assert!(record::load(&etcd, &keys).unwrap().is_none());
    assert!(record::store(&etcd, &keys, None, 0, &topology(1), None)
        .unwrap()
        .is_some());
    // A second "create" computed from the same (empty) read loses.
    assert!(record::store(&etcd, &keys, None, 0, &topology(9), None)
        .unwrap()
        .is_none());
    let stored = record::load(&etcd, &keys).unwrap().unwrap();
    assert_eq!(stored.topology.version, 1);
    let entry = Some(r#"{"version":2}"#.to_string());
    assert!(
        record::store(&etcd, &keys, None, stored.mod_revision, &topology(2), entry)
            .unwrap()
            .is_some()
    );
    // The revision read before that change is stale now.
    assert!(
        record::store(&etcd, &keys, None, stored.mod_revision, &topology(3), None)
            .unwrap()
            .is_none()
    );
    assert_eq!(
        record::load(&etcd, &keys)
            .unwrap()
            .unwrap()
            .topology
            .version,
        2
    );
    assert_eq!(
        record::failovers(&etcd, &keys).unwrap(),
        vec![r#"{"version":2}"#]
    );
}

#[test]
fn one_leader_at_a_time_and_a_lost_lease_ends_leadership() {
    let server = EtcdServer::start();
    let etcd = client(&server);
    let keys = Keys::new("election");
    let ttl = Duration::from_secs(2);
    let Campaign::Won(first) = campaign(&etcd, &keys.leader, "first", ttl).unwrap() else {
        panic!("the first candidate must win an empty election");
    };
    assert!(first.is_valid());
    match campaign(&etcd, &keys.leader, "second", ttl).unwrap() {
        Campaign::Lost { leader } => assert_eq!(leader, "first"),
        Campaign::Won(_) => panic!("two leaders at once"),
    }
    // The leader's writes carry its proof.
    assert!(
        record::store(&etcd, &keys, Some(first.writer()), 0, &topology(1), None)
            .unwrap()
            .is_some()
    );
    // Renewal keeps it leader past its TTL while its loop makes progress.
    let until = std::time::Instant::now() + ttl + Duration::from_millis(500);
    while std::time::Instant::now() < until {
        first.progress();
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(first.is_valid(), "the renewal thread keeps the lease");

    // The lease ends behind the leader's back (as when etcd expires it during a partition).
    etcd.lease_revoke(first.lease_id()).unwrap();
    assert!(
        eventually(ttl * 2, || !first.is_valid()),
        "a leader whose lease is gone must stop acting within the TTL"
    );
    let stored = record::load(&etcd, &keys).unwrap().unwrap();
    assert!(
        record::store(
            &etcd,
            &keys,
            Some(first.writer()),
            stored.mod_revision,
            &topology(2),
            None
        )
        .unwrap()
        .is_none(),
        "a deposed leader cannot write the record"
    );
    let Campaign::Won(second) = campaign(&etcd, &keys.leader, "second", ttl).unwrap() else {
        panic!("the leader key went with the lease: the next candidate wins");
    };
    assert!(record::store(
        &etcd,
        &keys,
        Some(second.writer()),
        stored.mod_revision,
        &topology(2),
        None
    )
    .unwrap()
    .is_some());
    drop(first);
    // A leader whose loop stalls (no progress) stops renewing, so it stops acting and its
    // lease runs out for the others.
    assert!(
        eventually(ttl * 3, || !second.is_valid()),
        "a stalled leader must step down"
    );
    // Resigning (drop) frees the key at once.
    drop(second);
    assert!(matches!(
        campaign(&etcd, &keys.leader, "third", ttl).unwrap(),
        Campaign::Won(_)
    ));
}

#[test]
fn an_unreachable_etcd_is_an_error_not_a_hang() {
    let mut server = EtcdServer::start();
    let etcd = Etcd::new(&server.addr(), Duration::from_secs(1));
    server.kill();
    let keys = Keys::new("down");
    assert!(record::load(&etcd, &keys).is_err());
    assert!(campaign(&etcd, &keys.leader, "x", Duration::from_secs(2)).is_err());
}
