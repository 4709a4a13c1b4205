//! `kvik-controller status`: the record in etcd, the leader, each node's health as probed now,
//! and the last failovers.

use crate::etcd::Etcd;
use crate::health::{probe, Renew};
use crate::record::{self, Keys};
use kvik_cluster::Opts;
use std::io::Write;

/// Prints the status of `cluster` to `out`.
pub fn print(etcd: &Etcd, cluster: &str, opts: &Opts, out: &mut dyn Write) -> Result<(), String> {
    let keys = Keys::new(cluster);
    let w = |out: &mut dyn Write, line: String| {
        let _ = writeln!(out, "{line}");
    };
    let leader = etcd
        .get(&keys.leader)?
        .map(|kv| {
            format!(
                "{} (lease {:x})",
                String::from_utf8_lossy(&kv.value),
                kv.lease
            )
        })
        .unwrap_or_else(|| "none (no controller holds the lease)".to_string());
    w(out, format!("cluster {cluster} in etcd {}", etcd.addr()));
    w(out, format!("leader: {leader}"));
    let Some(stored) = record::load(etcd, &keys)? else {
        w(out, "topology: none stored yet".to_string());
        return Ok(());
    };
    let t = &stored.topology;
    w(
        out,
        format!(
            "topology version {} (etcd mod_revision {}), {} nodes",
            t.version,
            stored.mod_revision,
            t.nodes.len()
        ),
    );
    for n in &t.nodes {
        let role = match &n.primary {
            Some(p) => format!("replica of {p}"),
            None => format!("primary of {} slots", n.slot_count()),
        };
        let p = probe(opts, &n.addr(), Renew::No);
        let health = match &p.error {
            Some(_) => p.summary(),
            None if p.version == t.version => format!("ok: {}", p.summary()),
            None => format!("BEHIND: {}", p.summary()),
        };
        w(out, format!("{} {} {role}: {health}", n.id, n.addr()));
    }
    let failovers = record::failovers(etcd, &keys)?;
    w(out, format!("last failovers ({}):", failovers.len()));
    for f in failovers.iter().rev() {
        w(out, format!("  {f}"));
    }
    Ok(())
}
