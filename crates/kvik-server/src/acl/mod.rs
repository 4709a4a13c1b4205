//! Access control (Redis 7.0's ACL): users, their passwords and permissions, the check every
//! command passes, and the ACL log.
//!
//! The registry lives on the [`crate::config::Config`] (users are configuration: `user` lines,
//! `aclfile`, `requirepass` sets the default user's password). A session points at its user's
//! [`UserCell`]; ACL SETUSER changes the cell in place, so connected clients see new rules at
//! their next command, as in Redis. [`admit`] is the one check, called by the dispatcher for
//! both the worker and the I/O-thread (cache hit) paths, by EXEC for each queued command, and
//! by scripts for each `redis.call`. While a user may do everything (the default user as
//! shipped) the check is one atomic load.

pub mod access;
pub mod categories;
pub mod file;
pub mod log;
pub mod protected;
pub mod rules;
pub mod sha256;

use crate::cmd::{ctx::CmdError, Entry};
use crate::error::ErrorKind;
use crate::session::Session;
use parking_lot::{Mutex, RwLock};
use rules::{Denial, User};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

/// One user as sessions hold it.
#[derive(Debug)]
pub struct UserCell {
    pub name: String,
    rules: RwLock<User>,
    /// The user may run anything on any key and channel: the check is skipped.
    unrestricted: AtomicBool,
    /// Deleted (ACL DELUSER, ACL LOAD): its clients are disconnected.
    deleted: AtomicBool,
}

impl UserCell {
    fn new(user: User) -> Arc<UserCell> {
        Arc::new(UserCell {
            name: user.name.clone(),
            unrestricted: AtomicBool::new(user.unrestricted()),
            rules: RwLock::new(user),
            deleted: AtomicBool::new(false),
        })
    }

    /// A copy of the user's rules.
    pub fn rules(&self) -> User {
        self.rules.read().clone()
    }

    fn set(&self, user: User) {
        self.unrestricted.store(user.unrestricted(), Relaxed);
        *self.rules.write() = user;
    }

    fn delete(&self) {
        self.deleted.store(true, Relaxed);
        self.unrestricted.store(false, Relaxed);
    }
}

/// The users, the default user, and the ACL log.
#[derive(Debug)]
pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<UserCell>>>,
    default: Arc<UserCell>,
    pub log: Mutex<log::AclLog>,
    /// `user` lines were read from the config file (they exclude `aclfile`, as in Redis).
    pub(crate) config_users: AtomicBool,
}

impl Default for Acl {
    fn default() -> Acl {
        let default = UserCell::new(User::default_user());
        let mut users = BTreeMap::new();
        users.insert("default".to_string(), default.clone());
        Acl {
            users: RwLock::new(users),
            default,
            log: Mutex::new(Default::default()),
            config_users: AtomicBool::new(false),
        }
    }
}

/// Where a command was refused, for the error text and the ACL log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// A client's command (also a command queued inside MULTI: `multi` in the log).
    Toplevel,
    Multi,
    /// EXEC re-checks each queued command: the rules may have changed since it was queued.
    Exec,
    /// `redis.call` / `redis.pcall` inside a script.
    Lua,
}

impl Context {
    fn log_name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi | Context::Exec => "multi",
            Context::Lua => "lua",
        }
    }
}

impl Acl {
    /// Whether the default user needs no password (`nopass`).
    pub fn default_nopass(&self) -> bool {
        self.default.rules.read().nopass
    }

    /// Whether a new connection starts authenticated (the default user has no password).
    pub fn default_authenticated(&self) -> bool {
        let u = self.default.rules.read();
        u.enabled && u.nopass
    }

    /// `requirepass`: the default user's only password, or none (nopass).
    pub fn set_requirepass(&self, password: &str) {
        let mut u = self.default.rules();
        let op = if password.is_empty() {
            "nopass".to_string()
        } else {
            format!(">{password}")
        };
        u.apply(b"resetpass", false).expect("valid rule");
        u.apply(op.as_bytes(), false).expect("valid rule");
        self.default.set(u);
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<UserCell>> {
        let name = std::str::from_utf8(name).ok()?;
        self.users.read().get(name).cloned()
    }

    /// Every user name, sorted.
    pub fn names(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    /// Every user's rules, sorted by name.
    pub fn all(&self) -> Vec<User> {
        self.users.read().values().map(|c| c.rules()).collect()
    }

    /// ACL SETUSER: applies `ops` to a copy of the user (created if new) and stores it only if
    /// all of them apply. `Err` is Redis's error message.
    pub fn set_user(&self, name: &[u8], ops: &[Vec<u8>], all_channels: bool) -> Result<(), String> {
        let name_str = String::from_utf8_lossy(name).into_owned();
        if name.iter().any(|c| c.is_ascii_whitespace()) {
            return Err("Usernames can't contain spaces or null characters".into());
        }
        let ops = rules::merge_selectors(ops).map_err(|start| {
            format!(
                "Unmatched parenthesis in acl selector starting at '{}'.",
                String::from_utf8_lossy(&start)
            )
        })?;
        let mut users = self.users.write();
        let existing = users.get(&name_str).cloned();
        let mut user = match &existing {
            Some(cell) => cell.rules(),
            None => User::new(&name_str, all_channels),
        };
        for op in &ops {
            user.apply(op, all_channels).map_err(|reason| {
                format!(
                    "Error in ACL SETUSER modifier '{}': {reason}",
                    String::from_utf8_lossy(op)
                )
            })?;
        }
        match existing {
            Some(cell) => cell.set(user),
            None => {
                users.insert(name_str, UserCell::new(user));
            }
        }
        Ok(())
    }

    /// ACL DELUSER: removes the users (never `default`), returns how many existed.
    pub fn delete_users(&self, names: &[&[u8]]) -> Result<usize, &'static str> {
        if names.iter().any(|n| *n == b"default") {
            return Err("The 'default' user cannot be removed");
        }
        let mut users = self.users.write();
        let mut n = 0;
        for name in names {
            if let Some(cell) = users.remove(&*String::from_utf8_lossy(name)) {
                cell.delete();
                n += 1;
            }
        }
        Ok(n)
    }

    /// Replaces every user with `users` (ACL LOAD, the ACL file at startup): users that exist
    /// keep their cell (their clients stay connected), the others are deleted; without a
    /// `default` line the default user gets its shipped rules.
    pub fn replace_all(&self, users: Vec<User>) {
        let mut map = self.users.write();
        let mut next = BTreeMap::new();
        for u in users {
            let cell = match map.get(&u.name) {
                Some(cell) => {
                    cell.set(u.clone());
                    cell.clone()
                }
                None => UserCell::new(u.clone()),
            };
            next.insert(u.name, cell);
        }
        if !next.contains_key("default") {
            self.default.set(User::default_user());
            next.insert("default".into(), self.default.clone());
        }
        for (name, cell) in map.iter() {
            if !next.contains_key(name) {
                cell.delete();
            }
        }
        *map = next;
    }

    /// AUTH / HELLO AUTH: the user, if it exists, is enabled and `password` opens it.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<UserCell>> {
        let cell = self.get(name)?;
        let ok = {
            let u = cell.rules.read();
            u.enabled && u.password_ok(password)
        };
        ok.then_some(cell)
    }
}

/// The session's user (the default user until AUTH names another).
pub fn user_of<'a>(acl: &'a Acl, session: &'a Session) -> &'a Arc<UserCell> {
    session.user.as_ref().unwrap_or(&acl.default)
}

/// Redis's refusal text for `denial` in `context`.
fn refusal(denial: Denial, context: Context, entry: &Entry) -> CmdError {
    match context {
        Context::Toplevel | Context::Multi => match denial {
            Denial::Command => CmdError::with(
                ErrorKind::NoPerm,
                format!(
                    "this user has no permissions to run the '{}' command",
                    entry.full_name
                ),
            ),
            Denial::Key(_) => CmdError::new(
                ErrorKind::NoPerm,
                "this user has no permissions to access one of the keys used as arguments",
            ),
            Denial::Channel(_) => CmdError::new(
                ErrorKind::NoPerm,
                "this user has no permissions to access one of the channels used as arguments",
            ),
        },
        Context::Exec => {
            let reason = match denial {
                Denial::Command => "no permission to execute the command or subcommand",
                Denial::Key(_) => "no permission to touch the specified keys",
                Denial::Channel(_) => {
                    "no permission to access one of the channels used as arguments"
                }
            };
            CmdError::with(
                ErrorKind::NoPerm,
                format!(
                    "ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}"
                ),
            )
        }
        Context::Lua => CmdError::new(ErrorKind::Err, &lua_refusal(denial)[4..]),
    }
}

/// The error line a script's `redis.call` gets (Redis 7.0's wording).
pub fn lua_refusal(denial: Denial) -> &'static str {
    match denial {
        Denial::Command => "ERR The user executing the script can't run this command or subcommand",
        Denial::Key(_) => "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments",
        Denial::Channel(_) => "ERR The user executing the script can't access at least one of the channels mentioned in the command arguments",
    }
}

/// Whether the session's user may run anything: the whole check on the hot path (one load).
#[inline]
fn unrestricted(server: &crate::server::Server, session: &Session) -> bool {
    user_of(&server.config.acl, session)
        .unrestricted
        .load(Relaxed)
}

/// The ACL check of one command: `Ok` if the session's user may run it; else the refusal is
/// logged (ACL LOG) and returned with Redis's text for `context`. A client whose user was
/// deleted is disconnected instead.
#[inline]
pub fn admit(
    server: &crate::server::Server,
    session: &Session,
    entry: &Entry,
    args: &[bytes::Bytes],
    context: Context,
) -> Result<(), CmdError> {
    if unrestricted(server, session) {
        return Ok(());
    }
    check_and_log(server, session, entry, args, context)
        .map_err(|d| refusal(d, in_multi(context, session), entry))
}

/// A client's command refused while it queues a transaction is logged as `multi`.
fn in_multi(context: Context, session: &Session) -> Context {
    if context == Context::Toplevel && session.multi.is_some() {
        Context::Multi
    } else {
        context
    }
}

/// [`admit`] without the error text: the refusal, logged.
pub fn check_and_log(
    server: &crate::server::Server,
    session: &Session,
    entry: &Entry,
    args: &[bytes::Bytes],
    context: Context,
) -> Result<(), Denial> {
    if unrestricted(server, session) {
        return Ok(());
    }
    let user = user_of(&server.config.acl, session);
    let denial = if user.deleted.load(Relaxed) {
        session.client.kill();
        Denial::Command
    } else {
        match user.rules.read().check(entry, args) {
            Ok(()) => return Ok(()),
            Err(d) => d,
        }
    };
    let context = in_multi(context, session);
    let (reason, object) = match denial {
        Denial::Command => ("command", entry.full_name.clone()),
        Denial::Key(i) => ("key", String::from_utf8_lossy(&args[i]).into_owned()),
        Denial::Channel(i) => ("channel", String::from_utf8_lossy(&args[i]).into_owned()),
    };
    log::record(
        server,
        session,
        reason,
        context.log_name(),
        object,
        &user.name,
    );
    Err(denial)
}

/// The ACL DRYRUN answer: `None` if allowed, else Redis's sentence.
pub fn dry_run(user: &UserCell, entry: &Entry, args: &[bytes::Bytes]) -> Option<String> {
    match user.rules.read().check(entry, args) {
        Ok(()) => None,
        Err(Denial::Command) => Some(format!(
            "This user has no permissions to run the '{}' command",
            entry.full_name
        )),
        Err(Denial::Key(i)) => Some(format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(&args[i])
        )),
        Err(Denial::Channel(i)) => Some(format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(&args[i])
        )),
    }
}
