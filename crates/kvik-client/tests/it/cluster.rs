//! The cluster client against a real 3-node redis-server cluster (kvik has no cluster mode
//! yet).

use std::time::Duration;

use kvik_client::cluster::key_slot;
use kvik_client::{cmd, Client, ClusterClient, Commands, ConnectOptions, Frame, ShardOptions};

use crate::common::{Endpoint, RedisServer};

fn owner(nodes: &[RedisServer], slot: u16) -> usize {
    let c = Client::connect(&nodes[0].addr(), ConnectOptions::new()).unwrap();
    let map = kvik_client::cluster::SlotMap::from_cluster_slots(
        &c.query(&cmd("CLUSTER").arg("SLOTS")).unwrap(),
        "127.0.0.1",
    )
    .unwrap();
    let addr = &map
        .ranges
        .iter()
        .find(|(a, b, _)| (*a..=*b).contains(&slot))
        .unwrap()
        .2;
    nodes.iter().position(|n| &n.addr() == addr).unwrap()
}

#[test]
fn cluster_routing_splitting_get_multi_ask_and_moved() {
    let nodes = kvik_testkit::start_redis_cluster();
    let opts = ShardOptions {
        conn: ConnectOptions::new().timeout(Duration::from_secs(20)),
        multiget_timeout: Duration::from_secs(20),
        ..ShardOptions::default()
    };
    let c = ClusterClient::connect(&[&nodes[1].addr()], opts, Duration::from_millis(200)).unwrap();
    assert_eq!(c.slot_map().ranges.len(), 3);
    for i in 0..300 {
        c.set(format!("ck:{i}"), format!("v{i}")).unwrap();
    }
    for i in 0..300 {
        assert_eq!(
            c.get(format!("ck:{i}")).unwrap().unwrap(),
            format!("v{i}").as_bytes()
        );
    }
    // Multi-key commands across slots are split and re-assembled in order.
    c.mset(&[("m{a}", "1"), ("m{b}", "2"), ("m{c}", "3")])
        .unwrap();
    assert_eq!(
        c.mget(&["m{c}", "nope", "m{a}", "m{b}"]).unwrap(),
        vec![
            Some(b"3".to_vec()),
            None,
            Some(b"1".to_vec()),
            Some(b"2".to_vec())
        ]
    );
    assert_eq!(c.exists(&["m{a}", "m{b}", "m{c}", "nope"]).unwrap(), 3);
    assert_eq!(c.del(&["m{a}", "m{b}", "nope"]).unwrap(), 2);
    // get_multi over all three nodes at once.
    let keys: Vec<String> = (0..400).map(|i| format!("ck:{i}")).collect();
    let r = c.get_multi(&keys);
    assert!(r.is_complete(), "{:?}", r.servers);
    assert_eq!(r.servers.len(), 3);
    assert_eq!(r.hits(), 300);

    // Move the slot of "foo" from its owner A to B by hand: first ASK during the migration,
    // then MOVED once it is done; the client follows both.
    c.set("foo", "bar").unwrap();
    let slot = key_slot(b"foo");
    let a = owner(&nodes, slot);
    let b = (a + 1) % 3;
    let admin = |i: usize| Client::connect(&nodes[i].addr(), ConnectOptions::new()).unwrap();
    let id = |i: usize| match admin(i).query(&cmd("CLUSTER").arg("MYID")).unwrap() {
        Frame::Bulk(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    };
    let (id_a, id_b) = (id(a), id(b));
    admin(b)
        .query(
            &cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("IMPORTING")
                .arg(&id_a),
        )
        .unwrap();
    admin(a)
        .query(
            &cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg("MIGRATING")
                .arg(&id_b),
        )
        .unwrap();
    admin(a)
        .query(
            &cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(nodes[b].port)
                .arg("foo")
                .arg(0)
                .arg(5000),
        )
        .unwrap();
    assert_eq!(
        c.get("foo").unwrap().as_deref(),
        Some(&b"bar"[..]),
        "ASK not followed"
    );
    for i in 0..3 {
        admin(i)
            .query(
                &cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("NODE")
                    .arg(&id_b),
            )
            .unwrap();
    }
    assert_eq!(
        c.get("foo").unwrap().as_deref(),
        Some(&b"bar"[..]),
        "MOVED not followed"
    );
    let map = c.slot_map();
    let served_by = &map
        .ranges
        .iter()
        .find(|(x, y, _)| (*x..=*y).contains(&slot))
        .unwrap()
        .2;
    assert_eq!(served_by, &nodes[b].addr());
    // get_multi with the moved key: the MGET on the new owner works.
    let r = c.get_multi(&["foo", "ck:1"]);
    assert!(r.is_complete(), "{:?}", r.servers);
    assert_eq!(r.get(0), Some(&b"bar"[..]));
}
