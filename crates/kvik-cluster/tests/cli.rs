//! The kvik-cluster binary against real kvik-server nodes (cluster mode) on loopback: create,
//! show, check (and its failures), add-node, remove-node, move-slots. Each run of the tool is
//! bounded by `timeout`.

use kvik_resp::cluster::key_slot;
use kvik_testkit::{kvik_server_bin, Endpoint, KvikServer};
use std::process::Command;

/// Runs kvik-cluster with `args`; returns (exit status, stdout, stderr).
fn tool(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("timeout")
        .arg("120")
        .arg(env!("CARGO_BIN_EXE_kvik-cluster"))
        .args(args)
        .output()
        .expect("run kvik-cluster");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs kvik-cluster and fails the test (with its output) unless it exits 0.
fn ok(args: &[&str]) -> String {
    let (code, out, err) = tool(args);
    assert_eq!(code, 0, "kvik-cluster {args:?} failed:\n{out}\n{err}");
    out
}

/// Runs kvik-cluster, which must fail with exit status 1; returns stdout + stderr.
fn fails(args: &[&str]) -> String {
    let (code, out, err) = tool(args);
    assert_eq!(code, 1, "kvik-cluster {args:?} should fail:\n{out}\n{err}");
    format!("{out}{err}")
}

/// `n` kvik-server nodes in cluster mode (no topology yet).
fn nodes(n: usize) -> Vec<KvikServer> {
    (0..n)
        .map(|_| KvikServer::start(kvik_server_bin(), &["--cluster-enabled", "yes"]))
        .collect()
}

fn addrs(nodes: &[KvikServer]) -> Vec<String> {
    nodes.iter().map(|n| n.addr()).collect()
}

/// (version, node lines) as a node reports them.
fn topology(n: &KvikServer) -> (u64, Vec<String>) {
    redis::cmd("CLUSTER")
        .arg("TOPOLOGY")
        .query(&mut n.client())
        .unwrap()
}

fn myid(n: &KvikServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut n.client())
        .unwrap()
}

#[test]
fn create_show_and_check() {
    let ns = nodes(3);
    let a = addrs(&ns);
    let mut args = vec!["create"];
    args.extend(a.iter().map(String::as_str));
    let out = ok(&args);
    assert!(
        out.contains("cluster created: 3 nodes, topology version 1"),
        "{out}"
    );
    for n in &ns {
        let (v, lines) = topology(n);
        assert_eq!(v, 1);
        assert_eq!(lines.len(), 3);
    }
    let (_, lines) = topology(&ns[0]);
    for (line, (n, range)) in
        lines
            .iter()
            .zip(ns.iter().zip(["0-5460", "5461-10922", "10923-16383"]))
    {
        assert_eq!(line, &format!("{} 127.0.0.1 {} {range}", myid(n), n.port));
    }
    let out = ok(&["show", &a[1]]);
    assert!(out.contains("topology version 1 (3 nodes)"), "{out}");
    for n in &ns {
        assert!(out.contains(&myid(n)), "{out}");
    }
    assert!(out.contains("0-5460 (5461 slots)"), "{out}");
    let out = ok(&["check", &a[2]]);
    assert!(out.contains("[OK] all 16384 slots are covered"), "{out}");
    // The nodes now belong to a cluster: a second create is refused.
    let mut again = vec!["create"];
    again.extend(a.iter().map(String::as_str));
    let out = fails(&again);
    assert!(out.contains("already belongs to a cluster"), "{out}");
    assert!(fails(&["create", &a[0], &a[0]]).contains("given twice"));
}

#[test]
fn check_reports_disagreeing_and_unreachable_nodes() {
    let mut ns = nodes(3);
    let a = addrs(&ns);
    ok(&["create", &a[0], &a[1], &a[2]]);
    // One node gets a newer version that nobody else has.
    let (_, lines) = topology(&ns[0]);
    let r: String = redis::cmd("CLUSTER")
        .arg("SETTOPOLOGY")
        .arg(7)
        .arg(&lines)
        .query(&mut ns[2].client())
        .unwrap();
    assert_eq!(r, "OK");
    let out = fails(&["check", &a[0]]);
    assert!(
        out.contains(&format!(
            "node {} disagrees: it has topology version 7",
            a[2]
        )),
        "{out}"
    );
    // Any change pushes max + 1 to everyone, which brings them back in line.
    let out = ok(&[
        "move-slots",
        "--from",
        &a[0],
        "--to",
        &a[1],
        "--slots",
        "0",
        &a[0],
    ]);
    assert!(out.contains("topology version 8"), "{out}");
    ok(&["check", &a[2]]);
    // A node down: check names it and fails.
    ns[1].kill9();
    let out = fails(&["check", &a[0]]);
    assert!(
        out.contains(&format!("node {} is unreachable", a[1])),
        "{out}"
    );
    let out = fails(&["show", &a[0]]);
    assert!(out.contains("UNREACHABLE"), "{out}");
    // Changes refuse to run with a node down.
    let out = fails(&[
        "move-slots",
        "--from",
        &a[0],
        "--to",
        &a[2],
        "--count",
        "1",
        &a[0],
    ]);
    assert!(out.contains("unreachable"), "{out}");
    // A node that is not in any cluster.
    let lone = nodes(1);
    let out = fails(&["check", &lone[0].addr()]);
    assert!(out.contains("not part of a cluster"), "{out}");
}

#[test]
fn add_and_remove_nodes() {
    let ns = nodes(3);
    let a = addrs(&ns);
    ok(&["create", &a[0], &a[1]]);
    let out = ok(&["add-node", &a[2], &a[0]]);
    assert!(out.contains("added, topology version 2"), "{out}");
    for n in &ns {
        let (v, lines) = topology(n);
        assert_eq!(v, 2);
        assert_eq!(lines.len(), 3);
        assert!(lines.contains(&format!("{} 127.0.0.1 {}", myid(&ns[2]), ns[2].port)));
    }
    ok(&["check", &a[2]]);
    assert!(fails(&["add-node", &a[2], &a[0]]).contains("already in the cluster"));
    // A node that owns slots cannot go.
    let out = fails(&["remove-node", &a[0], &a[1]]);
    assert!(out.contains("still owns 8192 slots (0-8191)"), "{out}");
    assert!(out.contains("move-slots"), "{out}");
    assert_eq!(topology(&ns[1]).0, 2, "nothing pushed");
    // An empty one can, named by id.
    let id = myid(&ns[2]);
    let out = ok(&["remove-node", &id, &a[0]]);
    assert!(out.contains("removed, topology version 3"), "{out}");
    for n in &ns {
        let (v, lines) = topology(n);
        assert_eq!(
            v, 3,
            "every node, the removed one included, has the new version"
        );
        assert_eq!(lines.len(), 2);
    }
    ok(&["check", &a[0]]);
    assert!(fails(&["remove-node", &id, &a[0]]).contains("no node"));
}

#[test]
fn move_slots_moves_keys_and_ownership() {
    let ns = nodes(3);
    let a = addrs(&ns);
    ok(&["create", &a[0], &a[1], &a[2]]);
    // 300 keys in slots 0..=9 (node 0), written to node 0 directly.
    let mut c0 = ns[0].client();
    let keys: Vec<String> = (0..)
        .map(|i| format!("key:{i}"))
        .filter(|k| key_slot(k.as_bytes()) < 10)
        .take(300)
        .collect();
    let mut p = redis::pipe();
    for k in &keys {
        p.cmd("SET").arg(k).arg(format!("v-{k}")).ignore();
    }
    p.query::<()>(&mut c0).unwrap();
    let out = ok(&[
        "move-slots",
        "--from",
        &a[0],
        "--to",
        &myid(&ns[1]),
        "--slots",
        "0-4,7",
        "--batch",
        "7",
        &a[2],
    ]);
    assert!(out.contains("moved 6 slots"), "{out}");
    assert!(out.contains("[6/6]"), "progress is shown: {out}");
    let mut c1 = ns[1].client();
    for k in &keys {
        let slot = key_slot(k.as_bytes());
        let moved = slot <= 4 || slot == 7;
        let (here, there) = if moved { (&mut c1, 1) } else { (&mut c0, 0) };
        let v: Option<String> = redis::cmd("GET").arg(k).query(here).unwrap();
        assert_eq!(
            v.as_deref(),
            Some(format!("v-{k}").as_str()),
            "{k} on node {there}"
        );
    }
    for slot in 0..10u16 {
        let count = |c: &mut redis::Connection| -> i64 {
            redis::cmd("CLUSTER")
                .arg("COUNTKEYSINSLOT")
                .arg(slot)
                .query(c)
                .unwrap()
        };
        let want = keys
            .iter()
            .filter(|k| key_slot(k.as_bytes()) == slot)
            .count() as i64;
        let (n0, n1) = (count(&mut c0), count(&mut c1));
        if slot <= 4 || slot == 7 {
            assert_eq!((n0, n1), (0, want), "slot {slot}");
        } else {
            assert_eq!((n0, n1), (want, 0), "slot {slot}");
        }
    }
    let (v, lines) = topology(&ns[2]);
    assert_eq!(v, 7, "one version per slot moved");
    assert!(lines[0].ends_with(" 5-6 8-5460"), "{lines:?}");
    assert!(lines[1].ends_with(" 0-4 7 5461-10922"), "{lines:?}");
    ok(&["check", &a[0]]);
    // --count takes the source's lowest slots; a slot the source does not own is refused.
    let out = ok(&[
        "move-slots",
        "--from",
        &a[1],
        "--to",
        &a[2],
        "--count",
        "2",
        &a[0],
    ]);
    assert!(out.contains("moving 2 slots (0-1)"), "{out}");
    let out = fails(&[
        "move-slots",
        "--from",
        &a[0],
        "--to",
        &a[1],
        "--slots",
        "0",
        &a[0],
    ]);
    assert!(out.contains("slot 0 is owned by"), "{out}");
    let out = fails(&[
        "move-slots",
        "--from",
        &a[0],
        "--to",
        &a[0],
        "--count",
        "1",
        &a[0],
    ]);
    assert!(out.contains("same node"), "{out}");
}

/// `--etcd`: changes are committed to the topology record in etcd (a real one on loopback)
/// before they are pushed; a record ahead of the nodes (a controller's change not pushed yet)
/// blocks changes computed from the nodes until `sync --etcd` pushes it.
#[test]
fn changes_go_through_the_etcd_record() {
    use kvik_cluster::{etcd::Etcd, record};
    let server = kvik_testkit::EtcdServer::start();
    let etcd_addr = server.addr();
    let etcd = Etcd::new(&etcd_addr, std::time::Duration::from_secs(5));
    let keys = record::Keys::new("c1");
    let ns = nodes(4);
    let a = addrs(&ns);
    let with_etcd = |args: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["--etcd", etcd_addr.as_str(), "--etcd-cluster", "c1"]
            .map(String::from)
            .to_vec();
        v.extend(args.iter().map(|s| s.to_string()));
        v
    };
    let run = |args: Vec<String>| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        tool(&refs)
    };
    let (code, out, err) = run(with_etcd(&["create", &a[0], &a[1], &a[2]]));
    assert_eq!(code, 0, "{out}{err}");
    let stored = record::load(&etcd, &keys).unwrap().unwrap();
    assert_eq!(stored.topology.version, 1);
    let (code, out, err) = run(with_etcd(&["create", &a[3]]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("etcd already holds topology version 1"),
        "{err}"
    );

    // Someone (a controller) committed version 2 and has not pushed it yet.
    let mut ahead = stored.topology.clone();
    ahead.version = 2;
    assert!(
        record::store(&etcd, &keys, None, stored.mod_revision, &ahead, None)
            .unwrap()
            .is_some()
    );
    let (code, out, err) = run(with_etcd(&["add-node", &a[3], &a[0]]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("etcd holds topology version 2"), "{err}");
    let (code, out, err) = run(with_etcd(&["sync", &a[0]]));
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(topology(&ns[1]).0, 2);

    let (code, out, err) = run(with_etcd(&["add-node", &a[3], &a[0]]));
    assert_eq!(code, 0, "{out}{err}");
    let stored = record::load(&etcd, &keys).unwrap().unwrap();
    assert_eq!(stored.topology.version, 3);
    assert_eq!(stored.topology.nodes.len(), 4);
    assert_eq!(topology(&ns[3]), (3, stored.topology.lines()));
}

/// Nodes with a password: without `-a` the tool says to give it (the nodes answer, with
/// NOAUTH: they are not reported unreachable); with it, every step authenticates on its own
/// connection.
#[test]
fn a_password_is_asked_for_and_then_used() {
    let ns: Vec<KvikServer> = (0..2)
        .map(|_| {
            KvikServer::start(
                kvik_server_bin(),
                &["--cluster-enabled", "yes", "--requirepass", "s3cret"],
            )
        })
        .collect();
    let a = addrs(&ns);
    let out = fails(&["create", &a[0], &a[1]]);
    assert!(out.contains("give the password with -a"), "{out}");
    assert!(!out.contains("unreachable"), "{out}");
    ok(&["-a", "s3cret", "create", &a[0], &a[1]]);
    ok(&["-a", "s3cret", "check", &a[0]]);
}
