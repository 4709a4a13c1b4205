//! The node's cluster file, `<dir>/cluster-topology.conf`: its id and the last topology it
//! accepted, one node line per line. Written atomically (temporary file, fsync, rename, fsync of
//! the directory), so a crash leaves the old file or the new one, never half of one.
//!
//! ```text
//! # kvik cluster node state (written by CLUSTER SETTOPOLOGY; do not edit while running)
//! myid 3f...e1
//! version 7
//! node 3f...e1 127.0.0.1 7001 0-5460
//! ```

use kvik_resp::topology::{is_node_id, Topology};
use std::io::Write;
use std::path::Path;

pub const FILE: &str = "cluster-topology.conf";

/// What the file holds.
pub struct Saved {
    pub myid: String,
    pub topology: Topology,
}

/// Reads the file; `None` if there is none yet (first start in cluster mode).
pub fn load(dir: &Path) -> Result<Option<Saved>, String> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let bad = |why: String| format!("{}: {why}", path.display());
    let mut myid = None;
    let mut version = 0u64;
    let mut lines = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "myid" if is_node_id(rest) => myid = Some(rest.to_string()),
            "version" => {
                version = rest
                    .parse()
                    .map_err(|_| bad(format!("bad version '{rest}'")))?
            }
            "node" => lines.push(rest.to_string()),
            _ => return Err(bad(format!("unexpected line '{line}'"))),
        }
    }
    let myid = myid.ok_or_else(|| bad("no myid line".into()))?;
    let topology = Topology::from_lines(version, &lines).map_err(bad)?;
    Ok(Some(Saved { myid, topology }))
}

/// Replaces the file atomically and durably.
pub fn save(dir: &Path, myid: &str, topology: &Topology) -> Result<(), String> {
    let mut text = String::from(
        "# kvik cluster node state (written by CLUSTER SETTOPOLOGY; do not edit while running)\n",
    );
    text.push_str(&format!("myid {myid}\nversion {}\n", topology.version));
    for l in topology.lines() {
        text.push_str(&format!("node {l}\n"));
    }
    let path = dir.join(FILE);
    let tmp = dir.join(format!("{FILE}.tmp"));
    let io = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    {
        let mut f = std::fs::File::create(&tmp).map_err(io)?;
        f.write_all(text.as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
    }
    std::fs::rename(&tmp, &path).map_err(io)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(dir.path()).unwrap().is_none());
        let id = "a".repeat(40);
        let t = Topology::from_lines(5, &[format!("{id} 127.0.0.1 7000 0-100 200")]).unwrap();
        save(dir.path(), &id, &t).unwrap();
        let s = load(dir.path()).unwrap().unwrap();
        assert_eq!(s.myid, id);
        assert_eq!(s.topology, t);
        std::fs::write(dir.path().join(FILE), "myid x\n").unwrap();
        assert!(load(dir.path()).is_err());
    }
}
