//! Automatic failover end to end: a real etcd, real kvik-server nodes (3 primaries, 2 replicas
//! of the first) and the kvik-controller binary, all on loopback. A writer drives one slot of
//! the first primary (following MOVED like a cluster client, `WAIT 1` after each batch); the
//! primary is killed with SIGKILL; the controller must promote a replica on its own, every
//! batch acknowledged by `WAIT 1` must be on the new primary, and the old primary, restarted,
//! must be told to follow the new one. The time until the slot serves again is printed, not
//! asserted. Every wait is bounded.

use kvik_resp::cluster::key_slot;
use kvik_testkit::{
    eventually, kvik_server_bin, start_kvik_cluster, Endpoint, EtcdServer, KvikServer,
};
use redis::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const NODE_TIMEOUT_MS: u64 = 2_000;

/// The kvik-controller binary as a child process; its log lines are collected (and echoed to
/// stderr, captured by the test harness); killed on drop.
struct ControllerProc {
    child: Child,
    log: Arc<Mutex<Vec<String>>>,
}

impl ControllerProc {
    fn start(etcd: &str, cluster: &str, id: &str, seeds: &[String]) -> ControllerProc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvik-controller"));
        cmd.args([
            "--etcd",
            etcd,
            "--cluster",
            cluster,
            "--probe-timeout-ms",
            "1000",
        ])
        .args(["run", "--id", id, "--probe-interval-ms", "200"])
        .args(["--node-timeout-ms", &NODE_TIMEOUT_MS.to_string()])
        .args(["--lease-ttl-secs", "3"]);
        for s in seeds {
            cmd.args(["--seed", s]);
        }
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kvik-controller");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stderr, sink, tag) = (child.stderr.take().unwrap(), log.clone(), id.to_string());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{tag}] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        ControllerProc { child, log }
    }

    fn logged(&self, needle: &str) -> bool {
        self.log.lock().unwrap().iter().any(|l| l.contains(needle))
    }
}

impl Drop for ControllerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `kvik-controller status` run in-process; returns (exit status, stdout + stderr).
fn status(etcd: &str, cluster: &str) -> (i32, String) {
    let args: Vec<String> = [
        "kvik-controller",
        "--etcd",
        etcd,
        "--cluster",
        cluster,
        "status",
    ]
    .map(String::from)
    .to_vec();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = kvik_controller::main_with(&args, &mut out, &mut err);
    out.extend_from_slice(&err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

fn kvik_cluster(args: &[&str]) -> (i32, String) {
    let mut argv = vec!["kvik-cluster".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = kvik_cluster::run(&argv, &mut out, &mut err);
    out.extend_from_slice(&err);
    (code, String::from_utf8_lossy(&out).into_owned())
}

/// ROLE: ("master", 0) or ("slave", primary port) with the link state.
fn role(n: &KvikServer) -> (String, i64, String) {
    let v: Vec<Value> = redis::cmd("ROLE").query(&mut n.client()).unwrap();
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

/// A hash tag whose slot primary `i` of the even 3-node split owns.
fn tag_of(i: usize) -> String {
    let (a, b) = kvik_resp::topology::even_split(3)[i];
    (0..)
        .map(|n| format!("t{n}"))
        .find(|t| (a..=b).contains(&key_slot(t.as_bytes())))
        .unwrap()
}

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

/// A cluster for the controller: etcd, 3 primaries (topology v1) and `replicas` replicas of
/// the first primary added with kvik-cluster (one version each).
struct Setup {
    etcd: EtcdServer,
    nodes: Vec<KvikServer>,
    replicas: Vec<KvikServer>,
    addrs: Vec<String>,
}

fn setup(replicas: usize) -> Setup {
    let etcd = EtcdServer::start();
    let bin = kvik_server_bin();
    let nodes = start_kvik_cluster(&bin, 3, &[]);
    let replicas: Vec<KvikServer> = (0..replicas)
        .map(|_| KvikServer::start(&bin, &["--cluster-enabled", "yes"]))
        .collect();
    for r in &replicas {
        let (code, out) = kvik_cluster(&["add-replica", &r.addr(), &nodes[0].addr()]);
        assert_eq!(code, 0, "{out}");
    }
    let mut addrs: Vec<String> = nodes.iter().map(|n| n.addr()).collect();
    addrs.extend(replicas.iter().map(|r| r.addr()));
    Setup {
        etcd,
        nodes,
        replicas,
        addrs,
    }
}

/// Waits until `status` says `leader` leads and etcd holds topology `version`.
fn wait_leading(etcd: &EtcdServer, leader: &str, version: u64) {
    let mut last = String::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            last = status(&etcd.addr(), "t").1;
            last.contains(&format!("leader: {leader} "))
                && last.contains(&format!("topology version {version} "))
        }),
        "{leader} never led with topology v{version} stored: {last}"
    );
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
    nodes[0].kill9();
    assert!(
        eventually(Duration::from_secs(30), || c.logged("etcd unreachable")),
        "the controller must say why it does nothing"
    );
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
    let (code, out) = status(&endpoints, "t");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("topology version 3 "), "{out}");
}

/// A network partition between the controller and a primary, made by freezing the primary
/// (SIGSTOP): the controller fails it over; thawed (SIGCONT), it serves the writes its clients
/// had queued as the primary it still believes it is, until the controller's push reaches it.
/// Those writes are lost when it rejoins as a replica (printed, and checked to be gone: no
/// diverged history survives), as docs/architecture.md says.
#[test]
fn a_frozen_primary_is_failed_over_and_thawed_follows_the_new_one() {
    let Setup {
        etcd,
        nodes,
        replicas,
        addrs,
    } = setup(1);
    let _c = ControllerProc::start(&etcd.addr(), "t", "ctl-a", &addrs[..1]);
    wait_leading(&etcd, "ctl-a", 2);
    let tag = tag_of(0);
    // A client pinned to the primary (it has not refreshed its slot map): it stops at MOVED.
    let stop = Arc::new(AtomicBool::new(false));
    let acks: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let pinned = {
        let (port, tag, stop, acks) = (nodes[0].port, tag.clone(), stop.clone(), acks.clone());
        std::thread::spawn(move || {
            let mut con = kvik_testkit::connect(port);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("{{{tag}}}p{i}");
                i += 1;
                match redis::cmd("SET").arg(&key).arg(1).query::<()>(&mut con) {
                    Ok(()) => acks.lock().unwrap().push((key, Instant::now())),
                    Err(e) if e.code() == Some("MOVED") => return,
                    Err(e) => panic!("pinned writer: {e}"),
                }
            }
        })
    };
    assert!(eventually(Duration::from_secs(30), || acks
        .lock()
        .unwrap()
        .len()
        >= 100));
    let freeze = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &nodes[0].pid().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill {sig}");
    };
    freeze("-STOP");
    assert!(
        eventually(Duration::from_secs(60), || role(&replicas[0]).0 == "master"),
        "the frozen primary was not failed over"
    );
    let after = format!("{{{tag}}}after");
    let _: () = redis::cmd("SET")
        .arg(&after)
        .arg("new")
        .query(&mut replicas[0].client())
        .unwrap();
    // Acknowledged after this instant means written by the old primary after the thaw.
    let thawed_at = Instant::now();
    freeze("-CONT");
    let want = (
        "slave".to_string(),
        replicas[0].port as i64,
        "connected".to_string(),
    );
    let mut seen = (String::new(), 0, String::new());
    assert!(
        eventually(Duration::from_secs(60), || {
            seen = role(&nodes[0]);
            seen == want
        }),
        "the thawed primary did not follow the new one: {seen:?}"
    );
    stop.store(true, Ordering::Relaxed);
    pinned.join().unwrap();
    let late: Vec<String> = acks
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, at)| *at > thawed_at)
        .map(|(k, _)| k.clone())
        .collect();
    println!(
        "partition: the thawed old primary acknowledged {} writes before the new topology \
         reached it (lost, as documented)",
        late.len()
    );
    let mut con = replicas[0].client();
    for k in &late {
        let v: Option<String> = redis::cmd("GET").arg(k).query(&mut con).unwrap();
        assert_eq!(
            v, None,
            "{k} was written on the old primary after the failover"
        );
    }
    let mut old = nodes[0].client();
    let _: () = redis::cmd("READONLY").query(&mut old).unwrap();
    assert!(
        eventually(Duration::from_secs(60), || redis::cmd("GET")
            .arg(&after)
            .query::<Option<String>>(&mut old)
            .ok()
            .flatten()
            .as_deref()
            == Some("new")),
        "the old primary never applied the new primary's writes"
    );
}
