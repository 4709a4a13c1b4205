//! The cluster's record in etcd: which keys hold what, and the one way to change it.
//!
//! Under `/kvik/<cluster>/`:
//! - `topology`: the version on the first line, then the node lines of `CLUSTER SETTOPOLOGY`
//!   (the text `CLUSTER TOPOLOGY` returns). The truth of who owns which slots.
//! - `leader`: the id of the controller that leads, attached to its lease (gone with it).
//! - `failovers`: the last failovers (JSON lines, newest last), for `kvik-controller status`.
//!
//! Every change is one etcd transaction that compares `topology`'s mod_revision with the one
//! the change was computed from, and (for a controller) that its leader key is still the one it
//! created: a writer working from a stale read, or a deposed leader, changes nothing.

use crate::etcd::{Compare, Etcd, Op};
use kvik_resp::topology::Topology;

/// How many failovers `failovers` keeps.
pub const FAILOVERS_KEPT: usize = 20;

/// The keys of one cluster.
#[derive(Clone, Debug)]
pub struct Keys {
    pub topology: String,
    pub leader: String,
    pub failovers: String,
}

impl Keys {
    pub fn new(cluster: &str) -> Keys {
        let base = format!("/kvik/{cluster}/");
        Keys {
            topology: format!("{base}topology"),
            leader: format!("{base}leader"),
            failovers: format!("{base}failovers"),
        }
    }
}

/// The topology as stored, with the revision a change must compare against.
#[derive(Clone, Debug)]
pub struct Stored {
    pub topology: Topology,
    pub mod_revision: i64,
}

/// Who may write: a leader proves it still holds its leader key (created at `revision`).
#[derive(Clone, Debug)]
pub struct Writer {
    pub leader_key: String,
    pub revision: i64,
}

pub fn encode(t: &Topology) -> Vec<u8> {
    let mut text = t.version.to_string();
    for line in t.lines() {
        text.push('\n');
        text.push_str(&line);
    }
    text.into_bytes()
}

pub fn decode(bytes: &[u8]) -> Result<Topology, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the stored topology is not UTF-8")?;
    let mut lines = text.lines();
    let version = lines
        .next()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or("the stored topology has no version line")?;
    let nodes: Vec<&str> = lines.filter(|l| !l.trim().is_empty()).collect();
    Topology::from_lines(version, &nodes)
        .map_err(|e| format!("the stored topology is invalid: {e}"))
}

/// Reads the stored topology (None before the first store).
pub fn load(etcd: &Etcd, keys: &Keys) -> Result<Option<Stored>, String> {
    match etcd.get(&keys.topology)? {
        None => Ok(None),
        Some(kv) => Ok(Some(Stored {
            topology: decode(&kv.value)?,
            mod_revision: kv.mod_revision,
        })),
    }
}

/// Stores `next` if the record is still at `based_on` (the mod_revision it was read at, 0: no
/// record yet) and `writer` (when given) still leads; appends `failover` (a JSON line) to the
/// failover list in the same transaction. Returns the record's new mod_revision when it was
/// stored, None when the compare failed.
pub fn store(
    etcd: &Etcd,
    keys: &Keys,
    writer: Option<&Writer>,
    based_on: i64,
    next: &Topology,
    failover: Option<String>,
) -> Result<Option<i64>, String> {
    let mut compares = vec![Compare::ModRevision(keys.topology.clone(), based_on)];
    if let Some(w) = writer {
        compares.push(Compare::CreateRevision(w.leader_key.clone(), w.revision));
    }
    let mut ops = vec![Op::Put {
        key: keys.topology.clone(),
        value: encode(next),
        lease: 0,
    }];
    if let Some(entry) = failover {
        // Read-modify-write of the list is safe: only the holder of the record's revision
        // (checked by the same transaction) writes it.
        let mut list = failovers(etcd, keys)?;
        list.push(entry);
        let start = list.len().saturating_sub(FAILOVERS_KEPT);
        ops.push(Op::Put {
            key: keys.failovers.clone(),
            value: list[start..].join("\n").into_bytes(),
            lease: 0,
        });
    }
    let txn = etcd.txn(&compares, &ops, &[])?;
    Ok(txn.succeeded.then_some(txn.revision))
}

/// The stored failovers, oldest first (JSON lines).
pub fn failovers(etcd: &Etcd, keys: &Keys) -> Result<Vec<String>, String> {
    Ok(match etcd.get(&keys.failovers)? {
        None => Vec::new(),
        Some(kv) => String::from_utf8_lossy(&kv.value)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_text_round_trips() {
        let id = |c: char| c.to_string().repeat(40);
        let lines = vec![
            format!("{} 127.0.0.1 7000 0-16383", id('a')),
            format!("{} 127.0.0.1 7001 replica-of {}", id('b'), id('a')),
        ];
        let t = Topology::from_lines(7, &lines).unwrap();
        let back = decode(&encode(&t)).unwrap();
        assert_eq!(back.version, 7);
        assert_eq!(back.lines(), t.lines());
        assert!(decode(b"").is_err());
    }
}
