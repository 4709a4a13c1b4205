//! The ACL command family (ACL SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG,
//! DRYRUN, GENPASS, SAVE, LOAD, HELP): replies and errors as Redis 7.0. The users, the check
//! and the log are in `crate::acl`; this module only speaks the protocol.

use super::ctx::{Args, CmdError, CmdResult, Ctx};
use super::spec::{CommandSpec, Flags, KeySpec};
use crate::acl::{self, categories::CATEGORIES};
use crate::config::redis_params_value;
use std::path::PathBuf;

const ACL: Flags = Flags::NOSCRIPT.union(Flags::LOADING).union(Flags::STALE);
const ADMIN: Flags = ACL.union(Flags::ADMIN);
const SLOW: &[&str] = &["slow"];
const ADMIN_ACL: &[&str] = &["admin", "slow", "dangerous"];

const fn sub(
    name: &'static str,
    arity: i32,
    flags: Flags,
    handler: super::spec::Handler,
    summary: &'static str,
) -> CommandSpec {
    let categories = if flags.contains(Flags::ADMIN) {
        ADMIN_ACL
    } else {
        SLOW
    };
    CommandSpec::new(name, arity, flags, KeySpec::NONE, handler)
        .acl(categories)
        .group("server")
        .doc(summary, "6.0.0", "O(1)")
}

static SUBS: &[CommandSpec] = &[
    sub(
        "cat",
        -2,
        ACL,
        cat,
        "List the ACL categories or the commands inside a category",
    ),
    sub(
        "deluser",
        -3,
        ADMIN,
        deluser,
        "Remove the specified ACL users and the associated rules",
    ),
    sub(
        "dryrun",
        -4,
        ADMIN,
        dryrun,
        "Returns whether the user can execute the given command without executing the command.",
    ),
    sub(
        "getuser",
        3,
        ADMIN,
        getuser,
        "Get the rules for a specific ACL user",
    ),
    sub(
        "genpass",
        -2,
        ACL,
        genpass,
        "Generate a pseudorandom secure password to use for ACL users",
    ),
    sub(
        "list",
        2,
        ADMIN,
        list,
        "List the current ACL rules in ACL config file format",
    ),
    sub(
        "load",
        2,
        ADMIN,
        load,
        "Reload the ACLs from the configured ACL file",
    ),
    sub(
        "log",
        -2,
        ADMIN,
        log,
        "List latest events denied because of ACLs in place",
    ),
    sub(
        "save",
        2,
        ADMIN,
        save,
        "Save the current ACL rules in the configured ACL file",
    ),
    sub(
        "setuser",
        -3,
        ADMIN,
        setuser,
        "Modify or create the rules for a specific ACL user",
    ),
    sub(
        "users",
        2,
        ADMIN,
        users,
        "List the username of all the configured ACL rules",
    ),
    sub(
        "whoami",
        2,
        ACL,
        whoami,
        "Return the name of the user associated to the current connection",
    ),
    CommandSpec::new(
        "help",
        2,
        Flags::LOADING.union(Flags::STALE),
        KeySpec::NONE,
        help,
    )
    .acl(SLOW)
    .group("server")
    .doc(
        "Show helpful text about the different subcommands",
        "6.0.0",
        "O(1)",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "acl",
    -2,
    Flags::empty(),
    KeySpec::NONE,
    super::spec::container,
)
.acl(SLOW)
.group("server")
.doc(
    "A container for Access List Control commands",
    "6.0.0",
    "Depends on subcommand.",
)
.subs(SUBS)];

/// `acl-pubsub-default`: new users get every channel when it is `allchannels`.
pub fn pubsub_default_all(config: &crate::config::Config) -> bool {
    redis_params_value(config, "acl-pubsub-default").as_deref() == Some("allchannels")
}

/// `aclfile`, if set.
pub fn acl_file(config: &crate::config::Config) -> Option<PathBuf> {
    redis_params_value(config, "aclfile")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
}

const NO_ACL_FILE: &str = "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn setuser(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let ops: Vec<Vec<u8>> = args[3..].iter().map(|a| a.to_vec()).collect();
    let all_channels = pubsub_default_all(&ctx.server.config);
    ctx.server
        .config
        .acl
        .set_user(&args[2], &ops, all_channels)
        .map_err(CmdError::err)?;
    ctx.out.ok();
    Ok(())
}

fn getuser(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some(cell) = ctx.server.config.acl.get(&args[2]) else {
        ctx.out.null();
        return Ok(());
    };
    let u = cell.rules();
    let out = &mut *ctx.out;
    out.map(6);
    out.bulk(b"flags");
    let flags = u.flags();
    out.array(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(u.passwords.len());
    for p in &u.passwords {
        out.bulk(p.as_bytes());
    }
    out.bulk(b"commands");
    out.bulk(u.root.describe_commands().as_bytes());
    out.bulk(b"keys");
    out.bulk(u.root.describe_keys().as_bytes());
    out.bulk(b"channels");
    out.bulk(u.root.describe_channels().as_bytes());
    out.bulk(b"selectors");
    out.array(u.selectors.len());
    for s in &u.selectors {
        out.map(3);
        out.bulk(b"commands");
        out.bulk(s.describe_commands().as_bytes());
        out.bulk(b"keys");
        out.bulk(s.describe_keys().as_bytes());
        out.bulk(b"channels");
        out.bulk(s.describe_channels().as_bytes());
    }
    Ok(())
}

fn deluser(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let names: Vec<&[u8]> = args[2..].iter().map(|a| &a[..]).collect();
    let n = ctx
        .server
        .config
        .acl
        .delete_users(&names)
        .map_err(CmdError::fixed)?;
    ctx.out.int(n as i64);
    Ok(())
}

fn list(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let users = ctx.server.config.acl.all();
    ctx.out.array(users.len());
    for u in users {
        ctx.out.bulk(u.describe().as_bytes());
    }
    Ok(())
}

fn users(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let names = ctx.server.config.acl.names();
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

fn whoami(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let name = acl::user_of(&ctx.server.config.acl, ctx.session)
        .name
        .clone();
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

fn cat(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::wrong_args("acl|cat"));
    }
    let Some(name) = args.get(2) else {
        ctx.out.array(CATEGORIES.len());
        for c in CATEGORIES {
            ctx.out.bulk(c.as_bytes());
        }
        return Ok(());
    };
    let bit = acl::categories::bit(name).ok_or_else(|| {
        CmdError::err(format_args!(
            "Unknown category '{}'",
            String::from_utf8_lossy(name)
        ))
    })?;
    let t = super::table();
    let names: Vec<&str> = acl::categories::of_entries()
        .iter()
        .enumerate()
        .filter(|(_, c)| *c & bit != 0)
        .map(|(id, _)| t.entry(id).full_name.as_str())
        .collect();
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

fn log(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::wrong_args("acl|log"));
    }
    let mut count = 10;
    if let Some(a) = args.get(2) {
        if a.eq_ignore_ascii_case(b"reset") {
            ctx.server.config.acl.log.lock().reset();
            ctx.out.ok();
            return Ok(());
        }
        count = kvik_resp::parse_i64(a)
            .filter(|n| *n >= 0)
            .ok_or(CmdError::not_integer())? as usize;
    }
    let entries = ctx.server.config.acl.log.lock().newest(count);
    let now = crate::clock::unix_ms();
    let out = &mut *ctx.out;
    out.array(entries.len());
    for e in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.as_bytes());
        out.bulk(b"object");
        out.bulk(e.object.as_bytes());
        out.bulk(b"username");
        out.bulk(e.username.as_bytes());
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.at_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

fn dryrun(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    let Some(user) = ctx.server.config.acl.get(&args[2]) else {
        return Err(CmdError::err(format_args!(
            "User '{}' not found",
            String::from_utf8_lossy(&args[2])
        )));
    };
    let command = &args[3..];
    let t = super::table();
    if t.lookup(&command[0]).is_none() {
        return Err(CmdError::err(format_args!(
            "Command '{}' not found",
            String::from_utf8_lossy(&command[0])
        )));
    }
    let entry = t.resolve(command).map_err(|(_, e)| e)?;
    match acl::dry_run(&user, entry, command) {
        None => ctx.out.ok(),
        Some(why) => ctx.out.bulk(why.as_bytes()),
    }
    Ok(())
}

fn genpass(ctx: &mut Ctx<'_>, args: &Args) -> CmdResult {
    const BAD_BITS: &str = "ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096";
    if args.len() > 3 {
        return Err(CmdError::wrong_args("acl|genpass"));
    }
    let bits = match args.get(2) {
        None => 256,
        Some(a) => kvik_resp::parse_i64(a)
            .filter(|b| (1..=4096).contains(b))
            .ok_or(CmdError::fixed(BAD_BITS))?,
    };
    let chars = (bits as usize).div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::Rng::fill(&mut rand::thread_rng(), &mut bytes[..]);
    let mut hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    hex.truncate(chars);
    ctx.out.bulk(hex.as_bytes());
    Ok(())
}

fn save(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let path = acl_file(&ctx.server.config).ok_or(CmdError::fixed(NO_ACL_FILE))?;
    acl::file::save(&ctx.server.config.acl, &path).map_err(CmdError::err)?;
    ctx.out.ok();
    Ok(())
}

fn load(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    let path = acl_file(&ctx.server.config).ok_or(CmdError::fixed(NO_ACL_FILE))?;
    let all_channels = pubsub_default_all(&ctx.server.config);
    acl::file::load(&ctx.server.config.acl, &path, all_channels).map_err(CmdError::err)?;
    ctx.out.ok();
    Ok(())
}

fn help(ctx: &mut Ctx<'_>, _args: &Args) -> CmdResult {
    super::admin::help_reply(
        ctx.out,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}
