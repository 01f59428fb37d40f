//! `mpbond proxy | primary | helper | run | keygen | pair | status`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use mpbond_daemon::config::Config;
use mpbond_daemon::keys::KeyPair;
use mpbond_daemon::node::{self, Roles};
use mpbond_daemon::pair::{add_to_config, Card, CardRole};
use mpbond_daemon::status::NodeStatus;

/// Options every daemon takes.
#[derive(Args, Debug)]
pub struct DaemonArgs {
    /// The device's configuration file (README.md, "Configuration").
    #[arg(short, long, value_name = "FILE")]
    config: PathBuf,
    /// Override the log filter (e.g. debug, mpbond_daemon=trace).
    #[arg(long)]
    log: Option<String>,
}

/// `mpbond proxy`.
#[derive(Args, Debug)]
pub struct ProxyArgs {
    #[command(flatten)]
    common: DaemonArgs,
    /// Override [proxy] listen.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Override [proxy] scheduler.
    #[arg(long)]
    scheduler: Option<String>,
}

/// `mpbond primary`.
#[derive(Args, Debug)]
pub struct PrimaryArgs {
    #[command(flatten)]
    common: DaemonArgs,
    /// Override [primary] socks.
    #[arg(long)]
    socks: Option<SocketAddr>,
    /// Override [primary] proxy.
    #[arg(long)]
    proxy: Option<String>,
    /// Override [primary] scheduler.
    #[arg(long)]
    scheduler: Option<String>,
    /// Require transparent interception: fail unless [primary.transparent] is configured
    /// (it runs whenever that section exists).
    #[arg(long)]
    transparent: bool,
}

/// `mpbond helper`.
#[derive(Args, Debug)]
pub struct HelperArgs {
    #[command(flatten)]
    common: DaemonArgs,
    /// Override [helper] listen.
    #[arg(long)]
    listen: Option<SocketAddr>,
}

/// `mpbond keygen`.
#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the private key (never overwritten).
    #[arg(short, long, value_name = "FILE")]
    out: PathBuf,
}

/// `mpbond pair`.
#[derive(Subcommand, Debug)]
pub enum PairCmd {
    /// Print this device's pairing card, for the other device's `pair add`.
    Card {
        /// This device's key file.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// What this device is to the other: primary, helper or proxy.
        #[arg(long)]
        role: String,
        /// A name for this device.
        #[arg(long)]
        name: String,
        /// Where the other device reaches this one (a helper's pipe listener, a proxy's
        /// listener), as host:port.
        #[arg(long)]
        addr: Option<String>,
    },
    /// Add another device's pairing card to this device's configuration.
    Add {
        /// This device's configuration file (edited in place; comments are kept).
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// The card, as printed by `mpbond pair card` on the other device.
        card: String,
    },
}

/// `mpbond status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The control endpoint (default: [control] listen of --config, else 127.0.0.1:7070).
    #[arg(long)]
    control: Option<SocketAddr>,
    /// Read the control endpoint from this configuration.
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Logs to stderr at `RUST_LOG`, else at `filter`.
pub(crate) fn init_logging(filter: &str) {
    let f = std::env::var("RUST_LOG").unwrap_or_else(|_| filter.to_string());
    use std::io::IsTerminal;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(f))
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn load(a: &DaemonArgs) -> Result<Config> {
    let c = Config::load(&a.config)?;
    init_logging(a.log.as_deref().unwrap_or(&c.log));
    Ok(c)
}

fn runtime(cfg: &Config, roles: Roles) -> Result<tokio::runtime::Runtime> {
    mpbond_daemon::sys::tune_allocator();
    let threads = match cfg.tuning.threads {
        0 if roles.proxy => std::thread::available_parallelism().map_or(1, |n| n.get()),
        0 => 1,
        n => n,
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn run_roles(cfg: Config, roles: Roles) -> Result<()> {
    cfg.validate().map_err(anyhow::Error::msg)?;
    runtime(&cfg, roles)?.block_on(node::run(cfg, roles))
}

/// `mpbond proxy`.
pub fn proxy(a: ProxyArgs) -> Result<()> {
    let mut c = load(&a.common)?;
    let p = c
        .proxy
        .as_mut()
        .with_context(|| format!("{} has no [proxy] section", a.common.config.display()))?;
    if let Some(l) = a.listen {
        p.listen = l;
    }
    if let Some(s) = a.scheduler {
        p.scheduler = s;
    }
    run_roles(
        c,
        Roles {
            proxy: true,
            primary: false,
            helper: false,
        },
    )
}

/// `mpbond primary`.
pub fn primary(a: PrimaryArgs) -> Result<()> {
    let mut c = load(&a.common)?;
    let p = c
        .primary
        .as_mut()
        .with_context(|| format!("{} has no [primary] section", a.common.config.display()))?;
    if let Some(s) = a.socks {
        p.socks = Some(s);
    }
    if let Some(x) = a.proxy {
        p.proxy = x;
    }
    if let Some(s) = a.scheduler {
        p.scheduler = s;
    }
    if a.transparent && p.transparent.is_none() {
        bail!("--transparent needs a [primary.transparent] section (listen, ports, uids, cgroups)");
    }
    run_roles(
        c,
        Roles {
            proxy: false,
            primary: true,
            helper: false,
        },
    )
}

/// `mpbond helper`.
pub fn helper(a: HelperArgs) -> Result<()> {
    let mut c = load(&a.common)?;
    let h = c
        .helper
        .as_mut()
        .with_context(|| format!("{} has no [helper] section", a.common.config.display()))?;
    if let Some(l) = a.listen {
        h.listen = l;
    }
    run_roles(
        c,
        Roles {
            proxy: false,
            primary: false,
            helper: true,
        },
    )
}

/// `mpbond run`: every role in the file (dual mode when it has [primary] and [helper]).
pub fn run_all(a: DaemonArgs) -> Result<()> {
    let c = load(&a)?;
    let roles = Roles {
        proxy: c.proxy.is_some(),
        primary: c.primary.is_some(),
        helper: c.helper.is_some(),
    };
    run_roles(c, roles)
}

/// `mpbond keygen`.
pub fn keygen(a: KeygenArgs) -> Result<()> {
    let k = KeyPair::generate();
    k.save(&a.out)?;
    println!("private key written to {}", a.out.display());
    println!("public key  {}", k.public);
    println!("fingerprint {}", k.public.fingerprint());
    Ok(())
}

/// `mpbond pair`.
pub fn pair(cmd: PairCmd) -> Result<()> {
    match cmd {
        PairCmd::Card {
            key,
            role,
            name,
            addr,
        } => {
            let k = KeyPair::load(&key)?;
            let role = CardRole::parse(&role).map_err(anyhow::Error::msg)?;
            if role != CardRole::Primary && addr.is_none() {
                bail!("a {role:?} card needs --addr (where the other device reaches this one)");
            }
            let card = Card {
                role,
                name,
                key: k.public,
                addr,
            };
            println!("{}", card.encode());
            eprintln!(
                "fingerprint {}: check that the other device shows the same after `pair add`",
                k.public.fingerprint()
            );
        }
        PairCmd::Add { config, card } => {
            let card = Card::decode(&card).map_err(anyhow::Error::msg)?;
            let text = std::fs::read_to_string(&config)
                .with_context(|| format!("cannot read {}", config.display()))?;
            let (new, done) = add_to_config(&text, &card).map_err(anyhow::Error::msg)?;
            Config::parse(&new, &config).context("the edited configuration does not validate")?;
            write_atomically(&config, &new)?;
            for d in done {
                println!("{d}");
            }
            println!(
                "paired with {:?}, fingerprint {} (compare it with the other screen)",
                card.name,
                card.key.fingerprint()
            );
        }
    }
    Ok(())
}

fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// `mpbond status`.
pub fn status(a: StatusArgs) -> Result<()> {
    let addr = match (a.control, &a.config) {
        (Some(c), _) => c,
        (None, Some(f)) => Config::load(f)?
            .control
            .map(|c| c.listen)
            .with_context(|| format!("{} has no [control] section", f.display()))?,
        (None, None) => "127.0.0.1:7070".parse()?,
    };
    let body = http_get(addr, "/status").with_context(|| {
        format!("no mpbond daemon answers on {addr} (is [control] configured?)")
    })?;
    if a.json {
        println!("{body}");
    } else {
        let st: NodeStatus = serde_json::from_str(&body).context("bad status reply")?;
        print!("{}", st.table());
    }
    Ok(())
}

fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(3))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
    let mut r = String::new();
    s.read_to_string(&mut r)?;
    let (head, body) = r.split_once("\r\n\r\n").context("bad HTTP reply")?;
    if !head.starts_with("HTTP/1.0 200") {
        bail!(
            "control endpoint answered: {}",
            head.lines().next().unwrap_or("")
        );
    }
    Ok(body.to_string())
}
