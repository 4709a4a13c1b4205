//! Automatic failover end to end: a real etcd, real kvik-server nodes (3 primaries, 2 replicas
//! of the first) and the kvik-controller binary, all on loopback. A writer drives one slot of
//! the first primary (following MOVED like a cluster client, `WAIT 1` after each batch); the
//! primary is killed with SIGKILL; the controller must promote a replica on its own, every
//! batch acknowledged by `WAIT 1` must be on the new primary, and the old primary, restarted,
//! must be told to follow the new one. The time until the slot serves again is printed, not
//! asserted. Every wait is bounded. Split brain (a frozen primary, a partition) is in fencing.rs.

mod common;

use common::*;
use kvik_resp::cluster::key_slot;
use kvik_testkit::{
    eventually, kvik_server_bin, start_kvik_cluster, Endpoint, EtcdServer, KvikServer,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the writer saw.
#[derive(Default)]
struct Writes {
    /// Keys (with their values) of batches `WAIT 1` acknowledged.
    acked: Vec<(String, String)>,
    /// Set by the test when it kills the primary: when, and the primary's address.
    killed: Option<(Instant, String)>,
    /// The first write accepted after the kill, and by which node.
    served_again: Option<(Instant, String)>,
}

/// Writes batches of 10 keys of one hash tag to whichever node owns the slot (following MOVED,
/// trying every node after a connection error), then `WAIT 1 2000`; a batch counts as
/// acknowledged only when WAIT says a replica has it.
fn writer(addrs: Vec<String>, tag: String, stop: Arc<AtomicBool>, seen: Arc<Mutex<Writes>>) {
    let mut target: Option<(String, redis::Connection)> = None;
    let mut next_try = 0usize;
    let mut i = 0u64;
    let connect = |addr: &str| -> Option<redis::Connection> {
        let c = redis::Client::open(format!("redis://{addr}/")).ok()?;
        let con = c
            .get_connection_with_timeout(Duration::from_millis(500))
            .ok()?;
        con.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        Some(con)
    };
    while !stop.load(Ordering::Relaxed) {
        if target.is_none() {
            let addr = addrs[next_try % addrs.len()].clone();
            next_try += 1;
            match connect(&addr) {
                Some(c) => target = Some((addr, c)),
                None => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        let (addr, con) = target.as_mut().unwrap();
        let mut batch = Vec::new();
        let mut failed = None;
        for _ in 0..10 {
            let (k, v) = (format!("{{{tag}}}k{i}"), i.to_string());
            i += 1;
            match redis::cmd("SET").arg(&k).arg(&v).query::<()>(con) {
                Ok(()) => batch.push((k, v)),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if !batch.is_empty() {
            let mut s = seen.lock().unwrap();
            let after_kill = s.killed.as_ref().is_some_and(|(_, dead)| dead != addr);
            if after_kill && s.served_again.is_none() {
                s.served_again = Some((Instant::now(), addr.clone()));
            }
        }
        if let Some(e) = failed {
            // MOVED: go where the node says; anything else: try the next node.
            let moved = (e.code() == Some("MOVED"))
                .then(|| {
                    e.detail()
                        .and_then(|d| d.split_whitespace().nth(1))
                        .map(str::to_string)
                })
                .flatten();
            target = moved.and_then(|a| connect(&a).map(|c| (a, c)));
            if target.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            continue;
        }
        match redis::cmd("WAIT").arg(1).arg(2000).query::<i64>(con) {
            Ok(n) if n >= 1 => seen.lock().unwrap().acked.extend(batch),
            Ok(_) => {}
            Err(_) => target = None,
        }
    }
}

#[test]
fn a_killed_primary_is_failed_over_by_the_controller_and_rejoins_as_replica() {
    let Setup {
        etcd,
        mut nodes,
        replicas,
        addrs,
    } = setup(2);
    let controller = ControllerProc::start(&etcd.addr(), "t", "ctl-a", &addrs[..1]);
    wait_leading(&etcd, "ctl-a", 3);

    // A writer on one slot of the first primary.
    let tag = tag_of(0);
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Writes::default()));
    let load = {
        let (addrs, tag, stop, seen) = (addrs.clone(), tag.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || writer(addrs, tag, stop, seen))
    };
    assert!(
        eventually(Duration::from_secs(60), || seen.lock().unwrap().acked.len()
            >= 300),
        "the writer got no WAIT-acknowledged batches before the kill"
    );

    nodes[0].kill9();
    let killed_at = Instant::now();
    let acked_before = {
        let mut s = seen.lock().unwrap();
        s.killed = Some((killed_at, nodes[0].addr()));
        s.acked.len()
    };
    assert!(
        eventually(Duration::from_secs(90), || seen
            .lock()
            .unwrap()
            .served_again
            .is_some()),
        "the slot never served writes again after the primary was killed"
    );
    let (at, by) = seen.lock().unwrap().served_again.clone().unwrap();
    println!(
        "failover: slot {} served again by {by} {} ms after kill -9 (node-timeout {} ms)",
        key_slot(tag.as_bytes()),
        at.duration_since(killed_at).as_millis(),
        NODE_TIMEOUT_MS
    );
    assert!(
        controller.logged("FAILOVER committed"),
        "the decision is logged"
    );
    // The other replica follows the new primary: WAIT 1 acknowledges writes again.
    assert!(
        eventually(Duration::from_secs(60), || seen.lock().unwrap().acked.len()
            >= acked_before + 100),
        "no WAIT-acknowledged writes after the failover: the second replica did not follow"
    );
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();

    let promoted: Vec<&KvikServer> = replicas.iter().filter(|r| role(r).0 == "master").collect();
    assert_eq!(promoted.len(), 1, "exactly one replica was promoted");
    let new_primary = promoted[0];
    assert_eq!(
        by,
        new_primary.addr(),
        "the slot is served by the promoted replica"
    );
    let acked = seen.lock().unwrap().acked.clone();
    let mut con = new_primary.client();
    let mut lost = Vec::new();
    for chunk in acked.chunks(500) {
        let keys: Vec<&str> = chunk.iter().map(|(k, _)| k.as_str()).collect();
        let values: Vec<Option<String>> = redis::cmd("MGET").arg(&keys).query(&mut con).unwrap();
        for ((k, v), got) in chunk.iter().zip(values) {
            if got.as_deref() != Some(v.as_str()) {
                lost.push(k.clone());
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} WAIT-acknowledged writes are missing on the new primary, e.g. {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
    println!(
        "failover: all {} WAIT-acknowledged writes ({} before the kill) are on the new primary",
        acked.len(),
        acked_before
    );

    // The old primary returns with its old topology; the controller tells it to follow.
    nodes[0].restart_same_port();
    let want = (
        "slave".to_string(),
        new_primary.port as i64,
        "connected".to_string(),
    );
    let mut seen_role = (String::new(), 0, String::new());
    assert!(
        eventually(Duration::from_secs(90), || {
            seen_role = role(&nodes[0]);
            seen_role == want
        }),
        "the old primary did not rejoin as a replica of the new one: ROLE {seen_role:?}"
    );
    let (code, out) = status(&etcd.addr(), "t");
    assert_eq!(code, 0, "{out}");
    println!("{out}");
    assert!(out.contains("topology version 4"), "{out}");
    assert!(out.contains("last failovers (1)"), "{out}");
    assert!(out.contains(&new_primary.addr()), "{out}");
}

#[test]
fn the_standby_controller_takes_over_when_the_leader_dies_during_a_failure() {
    let Setup {
        etcd,
        mut nodes,
        replicas,
        addrs,
    } = setup(1);
    let mut a = ControllerProc::start(&etcd.addr(), "t", "ctl-a", &addrs[..1]);
    wait_leading(&etcd, "ctl-a", 2);
    let b = ControllerProc::start(&etcd.addr(), "t", "ctl-b", &addrs[..1]);
    assert!(
        eventually(Duration::from_secs(30), || b.logged("standing by")),
        "the second controller must stand by while the first leads"
    );
    // The primary dies, and the leader with it before its node-timeout ran out.
    nodes[0].kill9();
    let killed_at = Instant::now();
    let _ = a.child.kill();
    let _ = a.child.wait();
    assert!(
        eventually(Duration::from_secs(90), || role(&replicas[0]).0 == "master"),
        "the standby never took over and promoted the replica"
    );
    println!(
        "takeover: replica promoted by the standby {} ms after the primary and the leader died \
         (lease TTL 3 s + node-timeout {NODE_TIMEOUT_MS} ms)",
        killed_at.elapsed().as_millis()
    );
    assert!(b.logged("elected leader") && b.logged("FAILOVER committed"));
    let (_, out) = status(&etcd.addr(), "t");
    assert!(out.contains("leader: ctl-b "), "{out}");
    // One decision, one version: the dead leader had not committed one.
    assert!(out.contains("topology version 3 "), "{out}");
    assert!(out.contains("last failovers (1)"), "{out}");
    let mut con = replicas[0].client();
    let _: () = redis::cmd("SET")
        .arg(format!("{{{}}}x", tag_of(0)))
        .arg(1)
        .query(&mut con)
        .unwrap();
}

#[test]
fn with_etcd_down_nothing_fails_over_and_the_rest_keeps_serving() {
    let Setup {
        mut etcd,
        mut nodes,
        replicas,
        addrs,
    } = setup(1);
    let c = ControllerProc::start(&etcd.addr(), "t", "ctl-a", &addrs[..1]);
    wait_leading(&etcd, "ctl-a", 2);
    etcd.kill();
    assert!(
        eventually(Duration::from_secs(30), || c.logged("etcd unreachable")),
        "the controller must say why it does nothing"
    );
    // No controller renews any lease now (it cannot read the record): a primary with a
    // replica keeps writing on its replica's echoes, past several leases.
    std::thread::sleep(Duration::from_millis(3 * LEASE_MS));
    let key = format!("{{{}}}z", tag_of(0));
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg(1)
        .query(&mut nodes[0].client())
        .expect("a primary with its replica up writes without etcd");
    nodes[0].kill9();
    // Longer than node-timeout + the lease: a controller acting on its own would have by now.
    std::thread::sleep(Duration::from_millis(NODE_TIMEOUT_MS + 5_000));
    assert_eq!(role(&replicas[0]).0, "slave", "no failover without etcd");
    assert!(!c.logged("FAILOVER committed"));
    // The other shards keep serving with their last topology.
    let mut con = nodes[1].client();
    let key = format!("{{{}}}y", tag_of(1));
    let _: () = redis::cmd("SET").arg(&key).arg(1).query(&mut con).unwrap();
    // etcd back: the controller leads again and finishes the job.
    etcd.restart();
    assert!(
        eventually(Duration::from_secs(90), || role(&replicas[0]).0 == "master"),
        "after etcd returned the controller never failed the dead primary over"
    );
}

#[test]
fn losing_a_minority_of_etcd_members_does_not_stop_a_failover() {
    let mut members = EtcdServer::start_cluster(3);
    let endpoints = members
        .iter()
        .map(EtcdServer::addr)
        .collect::<Vec<_>>()
        .join(",");
    let bin = kvik_server_bin();
    let mut nodes = start_kvik_cluster(&bin, 3, &[]);
    let replica = KvikServer::start(&bin, &["--cluster-enabled", "yes"]);
    let (code, out) = kvik_cluster(&["add-replica", &replica.addr(), &nodes[0].addr()]);
    assert_eq!(code, 0, "{out}");
    let c = ControllerProc::start(&endpoints, "t", "ctl-a", &[nodes[1].addr()]);
    let mut last = String::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            last = status(&endpoints, "t").1;
            last.contains("leader: ctl-a ") && last.contains("topology version 2 ")
        }),
        "{last}"
    );
    // The member the controller talks to first goes away, then a primary.
    members[0].kill();
    nodes[0].kill9();
    assert!(
        eventually(Duration::from_secs(90), || role(&replica).0 == "master"),
        "no failover with 2 of 3 etcd members up"
    );
    assert!(c.logged("FAILOVER committed"));
    // etcd may still be electing a new leader among the two members left: status retries.
    let mut out = String::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            let (code, o) = status(&endpoints, "t");
            out = o;
            code == 0 && out.contains("topology version 3 ")
        }),
        "{out}"
    );
}

/// The leader dies at the worst moment of a failover: right after its new record is committed
/// to etcd and before any node heard of it (the `exit-after-commit` failpoint). The standby
/// takes over, finds nodes behind the record and finishes the push: the replica is promoted by
/// the one committed decision, with no second version.
#[test]
fn the_standby_finishes_the_push_of_a_leader_killed_after_its_etcd_write() {
    let Setup {
        etcd,
        mut nodes,
        replicas,
        addrs,
    } = setup(1);
    let mut a = ControllerProc::start_with(
        &[],
        &[("KVIK_CONTROLLER_FAILPOINT", "exit-after-commit")],
        &etcd.addr(),
        "t",
        "ctl-a",
        &addrs[..1],
    );
    wait_leading(&etcd, "ctl-a", 2);
    let b = ControllerProc::start(&etcd.addr(), "t", "ctl-b", &addrs[..1]);
    assert!(
        eventually(Duration::from_secs(30), || b.logged("standing by")),
        "the second controller must stand by while the first leads"
    );
    nodes[0].kill9();
    let killed_at = Instant::now();
    let mut exit = None;
    assert!(
        eventually(Duration::from_secs(60), || {
            exit = a.child.try_wait().unwrap();
            exit.is_some()
        }),
        "the leader did not reach its failpoint"
    );
    assert_eq!(exit.unwrap().code(), Some(3), "exited at the failpoint");
    assert!(a.logged("FAILOVER committed") && a.logged("exiting before the push"));
    let (_, out) = status(&etcd.addr(), "t");
    assert!(out.contains("topology version 3 "), "{out}");
    assert!(
        eventually(Duration::from_secs(90), || role(&replicas[0]).0 == "master"),
        "the standby never pushed the committed record"
    );
    println!(
        "takeover: the record committed by the dead leader reached the replica {} ms after the \
         primary was killed (lease TTL 3 s)",
        killed_at.elapsed().as_millis()
    );
    assert!(b.logged("elected leader") && b.logged("pushing it"));
    assert!(!b.logged("FAILOVER committed"), "no second decision");
    let (_, out) = status(&etcd.addr(), "t");
    assert!(out.contains("leader: ctl-b "), "{out}");
    assert!(out.contains("topology version 3 "), "{out}");
    assert!(out.contains("last failovers (1)"), "{out}");
    let mut con = replicas[0].client();
    let key = format!("{{{}}}x", tag_of(0));
    assert!(
        eventually(Duration::from_secs(30), || redis::cmd("SET")
            .arg(&key)
            .arg(1)
            .query::<()>(&mut con)
            .is_ok()),
        "the promoted replica never accepted a write"
    );
}
