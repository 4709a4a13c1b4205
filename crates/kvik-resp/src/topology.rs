//! The cluster topology kvik's admin tool pushes to every node (there is no gossip): a version and,
//! per node, its id, address and slot ranges, or the primary it replicates. One node is one text
//! line, so the push is one command with one argument per node and a human can read it back:
//!
//! ```text
//! CLUSTER SETTOPOLOGY <version> "<node-id> <host> <port> [<slot>|<first>-<last> ...]" ...
//! CLUSTER SETTOPOLOGY <version> "<node-id> <host> <port> replica-of <primary-id>" ...
//! CLUSTER TOPOLOGY   ->  [<version>, ["<line>", ...]]
//! ```
//!
//! Node ids are 40 lowercase hex characters, as Redis Cluster's. A primary may own no slots; a
//! replica owns none (it serves its primary's slots to READONLY clients) and its primary is a
//! primary (no chains).

use crate::cluster::SLOTS;
use std::fmt;

/// One node of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyNode {
    /// 40 lowercase hex characters.
    pub id: String,
    /// The address clients are redirected to.
    pub host: String,
    /// The client port.
    pub port: u16,
    /// Inclusive slot ranges, ascending and non-overlapping after [`Topology::validate`].
    pub slots: Vec<(u16, u16)>,
    /// A replica: the id of the primary it follows (then `slots` is empty).
    pub primary: Option<String>,
}

/// The word of a node line that makes it a replica of the id after it.
const REPLICA_OF: &str = "replica-of";

/// A whole cluster topology at one version.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    /// Grows with every change; a node refuses a topology that is not newer than its own.
    pub version: u64,
    /// Every node, with or without slots.
    pub nodes: Vec<TopologyNode>,
}

/// True for a Redis-style node id: 40 lowercase hex characters.
pub fn is_node_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn parse_slot(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n) if (n as usize) < SLOTS => Ok(n),
        _ => Err(format!("invalid slot '{s}'")),
    }
}

/// Parses "a-b" or "a" into an inclusive range.
pub fn parse_slot_range(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (parse_slot(a)?, parse_slot(b)?),
        None => {
            let a = parse_slot(s)?;
            (a, a)
        }
    };
    if a > b {
        return Err(format!("invalid slot range '{s}'"));
    }
    Ok((a, b))
}

impl TopologyNode {
    /// Parses one node line: `<id> <host> <port> [ranges...]` or
    /// `<id> <host> <port> replica-of <primary-id>`.
    pub fn parse_line(line: &str) -> Result<TopologyNode, String> {
        let mut words = line.split_ascii_whitespace();
        let (Some(id), Some(host), Some(port)) = (words.next(), words.next(), words.next()) else {
            return Err(format!(
                "node line '{line}' needs '<id> <host> <port> [slots...]'"
            ));
        };
        if !is_node_id(id) {
            return Err(format!(
                "invalid node id '{id}' (40 lowercase hex characters)"
            ));
        }
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("invalid port '{port}'"))?;
        let rest: Vec<&str> = words.collect();
        let (slots, primary) = match rest.as_slice() {
            [REPLICA_OF, p] if is_node_id(p) => (Vec::new(), Some(p.to_string())),
            [REPLICA_OF, ..] => {
                return Err(format!(
                    "node line '{line}': '{REPLICA_OF}' needs one primary id (40 lowercase hex \
                     characters) and no slots"
                ))
            }
            words => (
                words
                    .iter()
                    .map(|w| parse_slot_range(w))
                    .collect::<Result<Vec<_>, _>>()?,
                None,
            ),
        };
        Ok(TopologyNode {
            id: id.to_string(),
            host: host.to_string(),
            port,
            slots,
            primary,
        })
    }

    /// "host:port".
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// A new primary that owns `slots`.
    pub fn primary(id: String, host: String, port: u16, slots: Vec<(u16, u16)>) -> TopologyNode {
        TopologyNode {
            id,
            host,
            port,
            slots,
            primary: None,
        }
    }

    /// True for a replica.
    pub fn is_replica(&self) -> bool {
        self.primary.is_some()
    }

    /// Number of slots this node owns.
    pub fn slot_count(&self) -> usize {
        self.slots.iter().map(|(a, b)| (*b - *a) as usize + 1).sum()
    }
}

impl fmt::Display for TopologyNode {
    /// The node line [`TopologyNode::parse_line`] reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.id, self.host, self.port)?;
        if let Some(p) = &self.primary {
            return write!(f, " {REPLICA_OF} {p}");
        }
        for (a, b) in &self.slots {
            if a == b {
                write!(f, " {a}")?;
            } else {
                write!(f, " {a}-{b}")?;
            }
        }
        Ok(())
    }
}

impl Topology {
    /// Builds a topology from node lines, checked with [`Topology::validate`].
    pub fn from_lines<S: AsRef<str>>(version: u64, lines: &[S]) -> Result<Topology, String> {
        let nodes = lines
            .iter()
            .map(|l| TopologyNode::parse_line(l.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut t = Topology { version, nodes };
        t.validate()?;
        Ok(t)
    }

    /// The node lines, in node order.
    pub fn lines(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.to_string()).collect()
    }

    /// Checks ids and addresses are unique, no slot has two owners, and every replica follows
    /// a primary of the topology; sorts and merges each node's ranges. Slots owned by nobody
    /// are allowed (a cluster being built or reshaped).
    pub fn validate(&mut self) -> Result<(), String> {
        for n in &self.nodes {
            let Some(p) = &n.primary else { continue };
            match self.node(p) {
                None => return Err(format!("replica {} follows unknown node {p}", n.id)),
                // (A node naming itself is caught here too.)
                Some(q) if q.is_replica() => {
                    return Err(format!(
                        "replica {} follows {p}, which is a replica itself",
                        n.id
                    ))
                }
                Some(_) => {}
            }
        }
        let mut owner: Vec<Option<usize>> = vec![None; SLOTS];
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.slots.sort_unstable();
            let mut merged: Vec<(u16, u16)> = Vec::with_capacity(n.slots.len());
            for &(a, b) in &n.slots {
                match merged.last_mut() {
                    Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                    _ => merged.push((a, b)),
                }
            }
            n.slots = merged;
            for &(a, b) in &n.slots {
                for s in a..=b {
                    if let Some(j) = owner[s as usize] {
                        if j != i {
                            return Err(format!("slot {s} is assigned to more than one node"));
                        }
                    }
                    owner[s as usize] = Some(i);
                }
            }
        }
        for (i, a) in self.nodes.iter().enumerate() {
            for b in &self.nodes[i + 1..] {
                if a.id == b.id {
                    return Err(format!("node id {} appears twice", a.id));
                }
                if a.addr() == b.addr() {
                    return Err(format!("address {} appears twice", a.addr()));
                }
            }
        }
        Ok(())
    }

    /// The node owning `slot`, if any.
    pub fn owner(&self, slot: u16) -> Option<&TopologyNode> {
        self.nodes
            .iter()
            .find(|n| n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
    }

    /// The node with id `id`.
    pub fn node(&self, id: &str) -> Option<&TopologyNode> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The replicas of the node with id `id`, in topology order.
    pub fn replicas_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a TopologyNode> + 'a {
        self.nodes
            .iter()
            .filter(move |n| n.primary.as_deref() == Some(id))
    }

    /// Slots no node owns.
    pub fn uncovered(&self) -> Vec<u16> {
        let mut covered = vec![false; SLOTS];
        for n in &self.nodes {
            for &(a, b) in &n.slots {
                for s in a..=b {
                    covered[s as usize] = true;
                }
            }
        }
        (0..SLOTS as u16)
            .filter(|s| !covered[*s as usize])
            .collect()
    }
}

/// Splits slots 0..16384 into `n` contiguous ranges as `redis-cli --cluster create` does
/// (3 nodes: 0-5460, 5461-10922, 10923-16383).
pub fn even_split(n: usize) -> Vec<(u16, u16)> {
    let n = n.clamp(1, SLOTS);
    let per = SLOTS as f64 / n as f64;
    let mut first = 0i64;
    let mut cursor = 0.0f64;
    (0..n)
        .map(|i| {
            let mut last = (cursor + per - 1.0).round() as i64;
            if last > SLOTS as i64 - 1 || i == n - 1 {
                last = SLOTS as i64 - 1;
            }
            last = last.max(first);
            let r = (first as u16, last as u16);
            first = last + 1;
            cursor += per;
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(c: char) -> String {
        std::iter::repeat_n(c, 40).collect()
    }

    #[test]
    fn lines_round_trip() {
        let line = format!("{} 127.0.0.1 7001 0-99 100 200-300", id('a'));
        let n = TopologyNode::parse_line(&line).unwrap();
        assert_eq!(n.slots, vec![(0, 99), (100, 100), (200, 300)]);
        assert_eq!(n.to_string(), line);
        let t = Topology::from_lines(3, &[line]).unwrap();
        assert_eq!(t.nodes[0].slots, vec![(0, 100), (200, 300)], "merged");
        assert_eq!(t.owner(250).unwrap().port, 7001);
        assert!(t.owner(150).is_none());
        assert_eq!(t.uncovered().len(), 16384 - 202);
    }

    #[test]
    fn bad_topologies_are_refused() {
        let a = format!("{} h 1 0-10", id('a'));
        let b = format!("{} h 2 10-20", id('b'));
        assert!(Topology::from_lines(1, &[&a, &b]).is_err(), "overlap");
        let b2 = format!("{} h 1 11-20", id('b'));
        assert!(Topology::from_lines(1, &[&a, &b2]).is_err(), "same address");
        assert!(TopologyNode::parse_line("xyz h 1").is_err());
        assert!(TopologyNode::parse_line(&format!("{} h 0", id('a'))).is_err());
        assert!(TopologyNode::parse_line(&format!("{} h 1 16384", id('a'))).is_err());
        assert!(TopologyNode::parse_line(&format!("{} h 1 9-3", id('a'))).is_err());
    }

    #[test]
    fn replica_lines_round_trip_and_are_checked() {
        let p = format!("{} 127.0.0.1 7001 0-16383", id('a'));
        let r = format!("{} 127.0.0.1 7002 replica-of {}", id('b'), id('a'));
        let t = Topology::from_lines(2, &[&p, &r]).unwrap();
        assert_eq!(t.lines(), vec![p.clone(), r.clone()]);
        assert!(t.nodes[1].is_replica() && t.nodes[1].slots.is_empty());
        assert_eq!(t.replicas_of(&id('a')).count(), 1);
        assert_eq!(t.owner(5).unwrap().port, 7001);
        let orphan = format!("{} h 3 replica-of {}", id('c'), id('d'));
        assert!(
            Topology::from_lines(1, &[&p, &orphan]).is_err(),
            "unknown primary"
        );
        let chain = format!("{} h 3 replica-of {}", id('c'), id('b'));
        assert!(Topology::from_lines(1, &[&p, &r, &chain]).is_err(), "chain");
        let own = format!("{} h 3 replica-of {}", id('c'), id('c'));
        assert!(Topology::from_lines(1, &[&own]).is_err(), "itself");
        let slots = format!("{} h 3 replica-of {} 5", id('c'), id('a'));
        assert!(
            TopologyNode::parse_line(&slots).is_err(),
            "slots on a replica"
        );
    }

    #[test]
    fn even_split_covers_every_slot_once() {
        for n in [1, 2, 3, 7] {
            let r = even_split(n);
            assert_eq!(r.len(), n);
            assert_eq!(r[0].0, 0);
            assert_eq!(r[n - 1].1, 16383);
            for w in r.windows(2) {
                assert_eq!(w[0].1 + 1, w[1].0);
            }
        }
        assert_eq!(
            even_split(3),
            vec![(0, 5460), (5461, 10922), (10923, 16383)]
        );
    }
}
