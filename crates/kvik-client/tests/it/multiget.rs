//! The sharded client and get_multi, including faults.

use std::time::Duration;

use kvik_client::{
    Commands, ConnectOptions, KeyOutcome, ServerStatus, ShardOptions, ShardedClient,
};

use crate::common::{Fake, FakeServer, Server};

fn shard_opts() -> ShardOptions {
    ShardOptions {
        conn: ConnectOptions::new().timeout(Duration::from_secs(20)),
        down_backoff: Duration::from_millis(300),
        max_down_backoff: Duration::from_secs(5),
        multiget_timeout: Duration::from_secs(20),
        multiget_chunk: 100,
    }
}

fn sharded(addrs: &[String]) -> ShardedClient {
    let servers: Vec<(&str, u32)> = addrs.iter().map(|a| (a.as_str(), 1)).collect();
    ShardedClient::new(&servers, shard_opts()).unwrap()
}

/// Four servers (two kvik, two redis), 1,000 keys written through the ring and read back in
/// one get_multi, with misses.
#[test]
fn get_multi_over_kvik_and_redis_servers() {
    let servers = [
        Server::kvik(&[]),
        Server::kvik(&[]),
        Server::redis(&[]),
        Server::redis(&[]),
    ];
    let addrs: Vec<String> = servers.iter().map(Server::addr).collect();
    let c = sharded(&addrs);
    for i in 0..1000 {
        c.set(format!("key:{i}"), format!("value:{i}")).unwrap();
    }
    let keys: Vec<String> = (0..1100).map(|i| format!("key:{i}")).collect();
    let r = c.get_multi(&keys);
    assert!(r.is_complete(), "{:?}", r.servers);
    assert_eq!(r.servers.len(), 4);
    assert_eq!(r.servers.iter().map(|s| s.keys).sum::<usize>(), 1100);
    for (i, v) in r.values.iter().enumerate() {
        if i < 1000 {
            assert_eq!(v, &KeyOutcome::Hit(format!("value:{i}").into_bytes()));
        } else {
            assert_eq!(v, &KeyOutcome::Miss);
        }
    }
    // Each server really holds its share (the ring spreads keys).
    for s in 0..4 {
        assert!(r.servers[s].keys > 100, "{:?}", r.servers);
    }
    // Sockets are pooled: a second call works the same.
    let again = c.get_multi(&keys[..10]);
    assert!(again.is_complete());
    assert_eq!(again.hits(), 10);
    assert_eq!(
        c.mget(&["key:1", "nope"]).unwrap(),
        vec![Some(b"value:1".to_vec()), None]
    );
}

/// A server that accepts and never answers: the deadline returns a partial result with that
/// server timed out and everyone else's keys intact.
#[test]
fn silent_server_gives_partial_result_at_the_deadline() {
    let real = [Server::kvik(&[]), Server::redis(&[])];
    let fake = FakeServer::start(Fake::Silent);
    let addrs = vec![real[0].addr(), real[1].addr(), fake.addr()];
    let c = sharded(&addrs);
    let keys: Vec<String> = (0..600).map(|i| format!("k{i}")).collect();
    for k in &keys {
        let owner = c.server_for(k.as_bytes());
        if owner != 2 {
            c.set(k, k).unwrap();
        }
    }
    let r = c.get_multi_timeout(&keys, Duration::from_millis(300));
    assert_eq!(
        r.servers[2].status,
        ServerStatus::TimedOut,
        "{:?}",
        r.servers
    );
    assert_eq!(r.servers[0].status, ServerStatus::Ok);
    assert_eq!(r.servers[1].status, ServerStatus::Ok);
    for (i, k) in keys.iter().enumerate() {
        if c.server_for(k.as_bytes()) == 2 {
            assert_eq!(r.values[i], KeyOutcome::Unknown);
        } else {
            assert_eq!(r.values[i], KeyOutcome::Hit(k.clone().into_bytes()));
        }
    }
    assert!(fake.requests.load(std::sync::atomic::Ordering::SeqCst) > 0);
    assert!(!r.is_complete());
    // A timeout alone does not mark the server down.
    assert!(!c.is_down(2));
}

/// A server closing mid-reply fails, is marked down, is skipped while down and retried after
/// its backoff; a refused connection is a failure too. Neither hides the others' results.
#[test]
fn failing_and_down_servers_are_reported_and_retried_after_backoff() {
    let real = Server::redis(&[]);
    let fake = FakeServer::start(Fake::PartialReplyThenClose);
    let dead = format!("127.0.0.1:{}", crate::common::free_port());
    let addrs = vec![real.addr(), fake.addr(), dead];
    let c = sharded(&addrs);
    let keys: Vec<String> = (0..300).map(|i| format!("x{i}")).collect();
    for k in &keys {
        if c.server_for(k.as_bytes()) == 0 {
            c.set(k, "v").unwrap();
        }
    }
    let r = c.get_multi(&keys);
    assert_eq!(r.servers[0].status, ServerStatus::Ok);
    match &r.servers[1].status {
        ServerStatus::Failed(why) => assert!(why.contains("middle of a reply"), "{why}"),
        other => panic!("closing server: {other:?}"),
    }
    match &r.servers[2].status {
        ServerStatus::Failed(why) => {
            assert!(why.contains("connect") || why.contains("refused"), "{why}")
        }
        other => panic!("dead server: {other:?}"),
    }
    for (i, k) in keys.iter().enumerate() {
        let expect = if c.server_for(k.as_bytes()) == 0 {
            KeyOutcome::Hit(b"v".to_vec())
        } else {
            KeyOutcome::Unknown
        };
        assert_eq!(r.values[i], expect);
    }
    assert!(c.is_down(1) && c.is_down(2));
    // While down: skipped without touching the network.
    let before = fake.accepted.load(std::sync::atomic::Ordering::SeqCst);
    let r = c.get_multi(&keys);
    assert_eq!(r.servers[1].status, ServerStatus::Down);
    assert_eq!(r.servers[2].status, ServerStatus::Down);
    assert_eq!(r.servers[0].status, ServerStatus::Ok);
    assert_eq!(
        fake.accepted.load(std::sync::atomic::Ordering::SeqCst),
        before
    );
    // Single-key commands to a down server fail fast.
    let k1 = keys
        .iter()
        .find(|k| c.server_for(k.as_bytes()) == 1)
        .unwrap();
    assert!(matches!(c.get(k1), Err(kvik_client::Error::ServerDown(_))));
    // After the backoff the server is tried again (and fails again).
    std::thread::sleep(Duration::from_millis(350));
    let r = c.get_multi(&keys);
    assert!(
        matches!(r.servers[1].status, ServerStatus::Failed(_)),
        "{:?}",
        r.servers
    );
    assert!(fake.accepted.load(std::sync::atomic::Ordering::SeqCst) > before);
}

/// Requests and replies far bigger than the socket buffers: writes and reads interleave.
#[test]
fn get_multi_bigger_than_socket_buffers() {
    let servers = [Server::kvik(&[]), Server::redis(&[])];
    let addrs: Vec<String> = servers.iter().map(Server::addr).collect();
    let c = sharded(&addrs);
    let big: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 253) as u8).collect();
    let big_keys: Vec<String> = (0..24).map(|i| format!("big:{i}")).collect();
    for k in &big_keys {
        c.set(k, &big).unwrap();
    }
    let r = c.get_multi(&big_keys);
    assert!(r.is_complete(), "{:?}", r.servers);
    assert!(r.values.iter().all(|v| v == &KeyOutcome::Hit(big.clone())));
    // 20,000 keys with 200-byte names: about 4 MB of requests.
    let pad = "p".repeat(200);
    let many: Vec<String> = (0..20_000).map(|i| format!("{pad}:{i}")).collect();
    for k in many.iter().step_by(97) {
        c.set(k, "here").unwrap();
    }
    let r = c.get_multi(&many);
    assert!(r.is_complete(), "{:?}", r.servers);
    for (i, v) in r.values.iter().enumerate() {
        if i % 97 == 0 {
            assert_eq!(v, &KeyOutcome::Hit(b"here".to_vec()));
        } else {
            assert_eq!(v, &KeyOutcome::Miss);
        }
    }
}

/// get_multi runs the handshake on its own sockets (AUTH + SELECT).
#[test]
fn get_multi_authenticates_and_selects() {
    let servers = [
        Server::kvik(&["--requirepass", "pw"]),
        Server::redis(&["--requirepass", "pw"]),
    ];
    let addrs: Vec<String> = servers.iter().map(Server::addr).collect();
    let mut o = shard_opts();
    o.conn = o.conn.auth(None, "pw").db(2);
    let servers_w: Vec<(&str, u32)> = addrs.iter().map(|a| (a.as_str(), 1)).collect();
    let c = ShardedClient::new(&servers_w, o).unwrap();
    for i in 0..50 {
        c.set(format!("a{i}"), "1").unwrap();
    }
    let keys: Vec<String> = (0..50).map(|i| format!("a{i}")).collect();
    let r = c.get_multi(&keys);
    assert!(r.is_complete(), "{:?}", r.servers);
    assert_eq!(r.hits(), 50);
    // Wrong password: the servers fail with the server's error text.
    let mut bad = shard_opts();
    bad.conn = bad.conn.auth(None, "nope");
    let c = ShardedClient::new(&servers_w, bad).unwrap();
    let r = c.get_multi(&keys);
    for s in &r.servers {
        assert!(
            matches!(&s.status, ServerStatus::Failed(w) if w.contains("WRONGPASS")),
            "{s:?}"
        );
    }
}
