//! One ACL user and its selectors: the rules of ACL SETUSER applied to them, the check of one
//! command against them, and their description (ACL LIST, ACL GETUSER, the ACL file).
//!
//! A selector is a set of allowed commands (a bit per command table entry, plus allowed first
//! arguments of commands without subcommands), key patterns with read/write permissions, and
//! channel patterns. A user has a root selector and any number of extra ones; a command is
//! allowed when one selector allows all of it. Command rules are kept in the order given (after
//! the last `+@all` / `-@all`) so the description reads as the rules that were applied; a rule
//! that changes nothing, or that a later rule for the same command replaces, is dropped.

use super::access::{self, Perm};
use super::categories;
use crate::cmd::{table, Entry};
use std::collections::BTreeMap;

/// Why a command was refused, with the index of the argument at fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denial {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denial {
    /// Redis picks the error of a refused command across selectors by this rank.
    fn rank(self) -> (u8, usize) {
        match self {
            Denial::Command => (1, 0),
            Denial::Key(i) => (2, i),
            Denial::Channel(i) => (4, i),
        }
    }
}

pub const UNKNOWN_COMMAND: &str = "Unknown command or category name in ACL";
pub const SYNTAX: &str = "Syntax error";
const KEYS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns";
const CHANNELS_AFTER_ALL: &str = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels";
const BAD_HASH: &str = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters";
const NO_SUCH_PASSWORD: &str = "The password you are trying to remove from the user does not exist";

#[derive(Clone, Debug, PartialEq, Eq)]
enum Target {
    Category(u32, String),
    /// A command and its subcommands, or one subcommand (ids), by its full name.
    Command(Vec<usize>, String),
    /// A first argument of a command without subcommands (`+select|0`).
    FirstArg(usize, Vec<u8>, String),
}

impl Target {
    fn name(&self) -> String {
        match self {
            Target::Category(_, n) => format!("@{n}"),
            Target::Command(_, n) | Target::FirstArg(_, _, n) => n.clone(),
        }
    }

    /// A later rule for `self` makes an earlier rule for `other` meaningless.
    fn replaces(&self, other: &Target) -> bool {
        let (mine, theirs) = (self.name(), other.name());
        mine == theirs
            || (matches!(self, Target::Command(..))
                && !mine.contains('|')
                && theirs.starts_with(&format!("{mine}|")))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    allow: bool,
    target: Target,
}

/// A key pattern and the permissions it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub perm: Perm,
}

impl KeyPattern {
    fn describe(&self) -> String {
        let flags = match (self.perm.read, self.perm.write) {
            (true, true) => "~",
            (true, false) => "%R~",
            _ => "%W~",
        };
        format!("{flags}{}", String::from_utf8_lossy(&self.pattern))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    /// `+@all`: the rules start from every command (and any added later).
    all_base: bool,
    rules: Vec<Rule>,
    /// Derived from `all_base` and `rules`.
    allowed: Vec<u64>,
    first_args: BTreeMap<usize, Vec<Vec<u8>>>,
    all_commands: bool,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// Nothing allowed; every channel when `acl-pubsub-default` is `allchannels`.
    pub fn new(all_channels: bool) -> Selector {
        let mut s = Selector {
            all_base: false,
            rules: Vec::new(),
            allowed: Vec::new(),
            first_args: BTreeMap::new(),
            all_commands: false,
            all_keys: false,
            keys: Vec::new(),
            all_channels,
            channels: Vec::new(),
        };
        s.rebuild();
        s
    }

    /// Everything allowed (the default user).
    pub fn everything() -> Selector {
        let mut s = Selector::new(true);
        s.all_keys = true;
        s.all_base = true;
        s.rebuild();
        s
    }

    pub fn all_commands(&self) -> bool {
        self.all_commands
    }

    fn rebuild(&mut self) {
        let n = table().len();
        let fill = if self.all_base { u64::MAX } else { 0 };
        self.allowed = vec![fill; n.div_ceil(64)];
        self.first_args.clear();
        let cats = categories::of_entries();
        for rule in self.rules.clone() {
            match &rule.target {
                Target::Category(bit, _) => {
                    for (id, c) in cats.iter().enumerate() {
                        if c & bit != 0 {
                            self.set_bit(id, rule.allow);
                        }
                    }
                }
                Target::Command(ids, _) => {
                    for &id in ids {
                        self.set_bit(id, rule.allow);
                        self.first_args.remove(&id);
                    }
                }
                Target::FirstArg(id, arg, _) => {
                    let args = self.first_args.entry(*id).or_default();
                    if !args.contains(arg) {
                        args.push(arg.clone());
                    }
                }
            }
        }
        self.all_commands = (0..n).all(|id| self.bit(id));
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed
            .get(id / 64)
            .is_some_and(|w| w & (1 << (id % 64)) != 0)
    }

    /// Applies a command rule: drops the earlier rules it replaces, and keeps it only if it
    /// changes what the selector allows.
    fn command_rule(&mut self, allow: bool, target: Target) {
        self.rules.retain(|r| !target.replaces(&r.target));
        self.rebuild();
        let before = (self.allowed.clone(), self.first_args.clone());
        self.rules.push(Rule { allow, target });
        self.rebuild();
        if (self.allowed.clone(), self.first_args.clone()) == before {
            self.rules.pop();
            self.rebuild();
        }
    }

    /// Applies one selector rule; `Err` is Redis's reason.
    pub fn apply(&mut self, op: &[u8]) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"allkeys" | b"~*" => {
                self.all_keys = true;
                self.keys.clear();
            }
            b"resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
            }
            b"allchannels" | b"&*" => {
                self.all_channels = true;
                self.channels.clear();
            }
            b"resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
            }
            b"allcommands" | b"+@all" => {
                self.all_base = true;
                self.rules.clear();
                self.rebuild();
            }
            b"nocommands" | b"-@all" => {
                self.all_base = false;
                self.rules.clear();
                self.rebuild();
            }
            _ => match op.first() {
                Some(b'~') => self.add_key(
                    &op[1..],
                    Perm {
                        read: true,
                        write: true,
                    },
                )?,
                Some(b'%') => {
                    let tilde = op.iter().position(|&c| c == b'~').ok_or(SYNTAX)?;
                    let mut perm = Perm {
                        read: false,
                        write: false,
                    };
                    for &f in &op[1..tilde] {
                        match f.to_ascii_uppercase() {
                            b'R' => perm.read = true,
                            b'W' => perm.write = true,
                            _ => return Err(SYNTAX),
                        }
                    }
                    if !perm.read && !perm.write {
                        return Err(SYNTAX);
                    }
                    self.add_key(&op[tilde + 1..], perm)?;
                }
                Some(b'&') => {
                    if self.all_channels {
                        return Err(CHANNELS_AFTER_ALL);
                    }
                    let p = op[1..].to_vec();
                    if !self.channels.contains(&p) {
                        self.channels.push(p);
                    }
                }
                Some(b'+') | Some(b'-') => {
                    let allow = op[0] == b'+';
                    let target = parse_target(&lower[1..], allow)?;
                    self.command_rule(allow, target);
                }
                _ => return Err(SYNTAX),
            },
        }
        Ok(())
    }

    fn add_key(&mut self, pattern: &[u8], perm: Perm) -> Result<(), &'static str> {
        if self.all_keys {
            return Err(KEYS_AFTER_ALL);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => {
                k.perm.read |= perm.read;
                k.perm.write |= perm.write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                perm,
            }),
        }
        Ok(())
    }

    /// Whether this selector allows `args` (resolved to `entry`).
    pub fn check(&self, entry: &Entry, args: &[bytes::Bytes]) -> Result<(), Denial> {
        use crate::cmd::spec::Flags;
        if !self.all_commands && !entry.spec.flags.contains(Flags::NO_AUTH) && !self.bit(entry.id) {
            let first = args.get(1).map(|a| a.to_ascii_lowercase());
            let by_first_arg = match (self.first_args.get(&entry.id), first) {
                (Some(allowed), Some(a)) => allowed.contains(&a),
                _ => false,
            };
            if !by_first_arg {
                return Err(Denial::Command);
            }
        }
        if !self.all_keys {
            for (pos, need) in access::keys_of(entry, args) {
                let granted = self.keys.iter().any(|k| {
                    (k.perm.read || !need.read)
                        && (k.perm.write || !need.write)
                        && kvik_types::glob::matches(&k.pattern, &args[pos])
                });
                if !granted {
                    return Err(Denial::Key(pos));
                }
            }
        }
        if !self.all_channels {
            if let Some(c) = access::channels_of(entry) {
                let end = if c.one { c.from + 1 } else { args.len() };
                let named = args.iter().enumerate().take(end).skip(c.from);
                for (pos, ch) in named {
                    let granted = self.channels.iter().any(|p| {
                        if c.pattern {
                            p[..] == ch[..]
                        } else {
                            kvik_types::glob::matches(p, ch)
                        }
                    });
                    if !granted {
                        return Err(Denial::Channel(pos));
                    }
                }
            }
        }
        Ok(())
    }

    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let k: Vec<String> = self.keys.iter().map(KeyPattern::describe).collect();
        k.join(" ")
    }

    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let c: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        c.join(" ")
    }

    pub fn describe_commands(&self) -> String {
        let mut s = String::from(if self.all_base { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push(if r.allow { '+' } else { '-' });
            s.push_str(&r.target.name());
        }
        s
    }

    /// The selector as rules: keys, channels, commands (ACL LIST).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let keys = self.describe_keys();
        if !keys.is_empty() {
            parts.push(keys);
        }
        if self.all_channels {
            parts.push("&*".into());
        } else {
            parts.push("resetchannels".into());
            let ch = self.describe_channels();
            if !ch.is_empty() {
                parts.push(ch);
            }
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }
}

/// Parses the target of a `+`/`-` rule (already lowercase, without the sign).
fn parse_target(name: &[u8], allow: bool) -> Result<Target, &'static str> {
    let text = std::str::from_utf8(name).map_err(|_| UNKNOWN_COMMAND)?;
    if let Some(cat) = text.strip_prefix('@') {
        let bit = categories::bit(cat.as_bytes()).ok_or(UNKNOWN_COMMAND)?;
        return Ok(Target::Category(bit, cat.to_string()));
    }
    let t = table();
    let (cmd, sub) = match text.split_once('|') {
        Some((c, s)) => (c, Some(s)),
        None => (text, None),
    };
    let entry = t.lookup(cmd.as_bytes()).ok_or(UNKNOWN_COMMAND)?;
    match sub {
        None => {
            let mut ids = vec![entry.id];
            ids.extend(t.subcommands(entry).map(|e| e.id));
            Ok(Target::Command(ids, entry.full_name.clone()))
        }
        Some(s) if !entry.spec.subcommands.is_empty() => {
            let sub = t
                .subcommands(entry)
                .find(|e| e.spec.name == s)
                .ok_or(UNKNOWN_COMMAND)?;
            Ok(Target::Command(vec![sub.id], sub.full_name.clone()))
        }
        Some(s) if allow && !s.is_empty() && !s.contains('|') => Ok(Target::FirstArg(
            entry.id,
            s.as_bytes().to_vec(),
            format!("{}|{s}", entry.full_name),
        )),
        Some(_) => Err(UNKNOWN_COMMAND),
    }
}

/// One user: flags, password hashes and selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub enabled: bool,
    pub nopass: bool,
    /// `sanitize-payload` (true) or `skip-sanitize-payload` (false), once either was given.
    pub sanitize: Option<bool>,
    /// Lowercase hex SHA-256 of each password, in the order added.
    pub passwords: Vec<String>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
}

impl User {
    /// A user as ACL SETUSER creates it: off, no passwords, no commands, no keys.
    pub fn new(name: &str, all_channels: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::new(all_channels),
            selectors: Vec::new(),
        }
    }

    /// The default user of a fresh server: on, nopass, everything allowed.
    pub fn default_user() -> User {
        User {
            name: "default".into(),
            enabled: true,
            nopass: true,
            sanitize: None,
            passwords: Vec::new(),
            root: Selector::everything(),
            selectors: Vec::new(),
        }
    }

    /// Allows every command, key and channel (the ACL check can be skipped).
    pub fn unrestricted(&self) -> bool {
        self.root.all_commands && self.root.all_keys && self.root.all_channels
    }

    /// Applies one ACL SETUSER argument (a selector in parentheses is one argument);
    /// `all_channels` is `acl-pubsub-default`. `Err` is Redis's reason.
    pub fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), &'static str> {
        let lower = op.to_ascii_lowercase();
        match &lower[..] {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"sanitize-payload" => self.sanitize = Some(true),
            b"skip-sanitize-payload" => self.sanitize = Some(false),
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                let name = std::mem::take(&mut self.name);
                *self = User::new(&name, all_channels);
                self.sanitize = Some(true);
            }
            _ => match op.first() {
                Some(b'>') => {
                    let hash = super::sha256::hex(&op[1..]);
                    self.add_password(hash);
                }
                Some(b'#') => {
                    let hash = valid_hash(&op[1..])?;
                    self.add_password(hash);
                }
                Some(b'<') => self.remove_password(&super::sha256::hex(&op[1..]))?,
                Some(b'!') => self.remove_password(&valid_hash(&op[1..])?)?,
                Some(b'(') if op.len() >= 2 && op.ends_with(b")") => {
                    let mut s = Selector::new(all_channels);
                    for part in op[1..op.len() - 1].split(|c| c.is_ascii_whitespace()) {
                        if !part.is_empty() {
                            s.apply(part)?;
                        }
                    }
                    self.selectors.push(s);
                }
                _ => self.root.apply(op)?,
            },
        }
        Ok(())
    }

    fn add_password(&mut self, hash: String) {
        self.nopass = false;
        if !self.passwords.contains(&hash) {
            self.passwords.push(hash);
        }
    }

    fn remove_password(&mut self, hash: &str) -> Result<(), &'static str> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != hash);
        if self.passwords.len() == before {
            return Err(NO_SUCH_PASSWORD);
        }
        Ok(())
    }

    /// Whether `password` opens this user (it must also be enabled to log in).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        self.nopass || {
            let hash = super::sha256::hex(password);
            self.passwords.contains(&hash)
        }
    }

    /// Whether the user may run `args`; with several selectors, the error Redis would pick.
    pub fn check(&self, entry: &Entry, args: &[bytes::Bytes]) -> Result<(), Denial> {
        let mut worst = Denial::Command;
        for s in std::iter::once(&self.root).chain(&self.selectors) {
            match s.check(entry, args) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// The flags ACL GETUSER lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(true) => f.push("sanitize-payload"),
            Some(false) => f.push("skip-sanitize-payload"),
            None => {}
        }
        f
    }

    /// The user as one line of rules, as ACL LIST and the ACL file write it.
    pub fn describe(&self) -> String {
        let mut parts = vec![format!("user {}", self.name)];
        parts.extend(self.flags().iter().map(|f| f.to_string()));
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        parts.push(self.root.describe());
        parts.extend(self.selectors.iter().map(|s| format!("({})", s.describe())));
        parts.join(" ")
    }
}

fn valid_hash(h: &[u8]) -> Result<String, &'static str> {
    if h.len() != 64 || !h.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(BAD_HASH);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Joins SETUSER arguments so a selector split over several arguments (`(+get` `~x)`) is one;
/// `Err` is the argument where an unmatched parenthesis starts.
pub fn merge_selectors(args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    for a in args {
        match open.as_mut() {
            Some(acc) => {
                acc.push(b' ');
                acc.extend_from_slice(a);
                if a.ends_with(b")") {
                    out.push(open.take().unwrap());
                }
            }
            None if a.starts_with(b"(") && !a.ends_with(b")") => open = Some(a.clone()),
            None => out.push(a.clone()),
        }
    }
    match open {
        Some(acc) => {
            let first = acc.split(|&c| c == b' ').next().unwrap_or(&[]).to_vec();
            Err(first)
        }
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut u = User::new("t", false);
        for r in rules {
            u.apply(r.as_bytes(), false).unwrap();
        }
        u
    }

    fn args(a: &[&str]) -> Vec<bytes::Bytes> {
        a.iter()
            .map(|s| bytes::Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    fn check(u: &User, a: &[&str]) -> Result<(), Denial> {
        let a = args(a);
        let e = table().resolve(&a).unwrap();
        u.check(e, &a)
    }

    #[test]
    fn descriptions_match_redis() {
        assert_eq!(
            User::default_user().describe(),
            "user default on nopass ~* &* +@all"
        );
        assert_eq!(user(&[]).describe(), "user t off resetchannels -@all");
        let cases = [
            (&["+@hash"][..], "-@all +@hash"),
            (&["+@hash", "-hset"][..], "-@all +@hash -hset"),
            (&["+get", "+set", "-set"][..], "-@all +get"),
            (&["+@all", "-@dangerous"][..], "+@all -@dangerous"),
            (&["+@all", "-get", "+get"][..], "+@all"),
            (&["+config|get", "+config"][..], "-@all +config"),
            (&["+config", "-config|set"][..], "-@all +config -config|set"),
            (&["+select|0", "+select|1", "-select"][..], "-@all"),
            (&["+select|0", "+select"][..], "-@all +select"),
        ];
        for (rules, want) in cases {
            assert_eq!(user(rules).root.describe_commands(), want, "{rules:?}");
        }
        let u = user(&[
            "on",
            ">p1",
            "~foo*",
            "%R~bar*",
            "%W~baz*",
            "&chan*",
            "+get",
            "(+set ~x*)",
        ]);
        assert_eq!(
            u.describe(),
            "user t on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a \
             ~foo* %R~bar* %W~baz* resetchannels &chan* -@all +get (~x* resetchannels -@all +set)"
        );
    }

    #[test]
    fn errors_match_redis() {
        let mut u = User::new("t", false);
        assert_eq!(u.apply(b"foo", false), Err(SYNTAX));
        assert_eq!(u.apply(b"+nosuch", false), Err(UNKNOWN_COMMAND));
        assert_eq!(u.apply(b"+@nosuch", false), Err(UNKNOWN_COMMAND));
        assert_eq!(u.apply(b"-select|0", false), Err(UNKNOWN_COMMAND));
        assert_eq!(u.apply(b"+config|nosuch", false), Err(UNKNOWN_COMMAND));
        assert_eq!(u.apply(b"#abc", false), Err(BAD_HASH));
        assert_eq!(u.apply(b"%X~a", false), Err(SYNTAX));
        assert_eq!(u.apply(b"<nope", false), Err(NO_SUCH_PASSWORD));
        u.apply(b"allkeys", false).unwrap();
        assert_eq!(u.apply(b"~y", false), Err(KEYS_AFTER_ALL));
        assert_eq!(
            merge_selectors(&[b"(+get".to_vec()]),
            Err(b"(+get".to_vec())
        );
    }

    #[test]
    fn checks_commands_keys_and_channels() {
        let u = user(&[
            "+get",
            "+set",
            "+publish",
            "+psubscribe",
            "+select|0",
            "~a*",
            "%R~r*",
            "&ch*",
        ]);
        assert_eq!(check(&u, &["get", "a1"]), Ok(()));
        assert_eq!(check(&u, &["get", "r1"]), Ok(()));
        assert_eq!(check(&u, &["set", "r1", "v"]), Err(Denial::Key(1)));
        assert_eq!(check(&u, &["incr", "a1"]), Err(Denial::Command));
        assert_eq!(check(&u, &["select", "0"]), Ok(()));
        assert_eq!(check(&u, &["select", "1"]), Err(Denial::Command));
        assert_eq!(check(&u, &["publish", "ch1", "m"]), Ok(()));
        assert_eq!(check(&u, &["publish", "x", "m"]), Err(Denial::Channel(1)));
        assert_eq!(check(&u, &["psubscribe", "ch*"]), Ok(()));
        assert_eq!(check(&u, &["psubscribe", "c*"]), Err(Denial::Channel(1)));
        // AUTH and HELLO need no permission.
        assert_eq!(check(&u, &["auth", "x", "y"]), Ok(()));
        // A selector allows what the root does not.
        let u = user(&["+get", "~a*", "(+set ~b*)"]);
        assert_eq!(check(&u, &["set", "b", "1"]), Ok(()));
        assert_eq!(check(&u, &["set", "a", "1"]), Err(Denial::Key(1)));
        assert_eq!(check(&u, &["get", "b"]), Err(Denial::Key(1)));
    }
}
