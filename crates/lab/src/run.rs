//! One run: build the testbed, start a scheme's programs, download, collect every number,
//! tear everything down.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpbond_daemon::keys::KeyPair;
use mpbond_sim::fluid::{lower_bound, FluidPath};
use serde::Serialize;
use tokio::sync::watch;

use crate::emu::{LinkReport, PacketEvent};
use crate::http::{self, Via};
use crate::netns::{self, sh};
use crate::scenario::Scenario;
use crate::scheme::Scheme;
use crate::topo::{addr, Testbed, TopologySpec};

/// Emulator time at which the workload starts: the scheme's programs have connected by then.
pub const WARMUP: Duration = Duration::from_millis(2500);
/// TCP payload per 1500-byte IP packet (MSS 1448 with timestamps): the lower bound counts
/// payload capacity, because that is what a download can use.
pub const PAYLOAD_SHARE: f64 = 1448.0 / 1500.0;

/// Where the programs and files are.
#[derive(Clone, Debug)]
pub struct RunEnv {
    /// The `mpbond` binary (for the daemons).
    pub exe: PathBuf,
    /// A scratch directory for configs, keys and logs.
    pub work: PathBuf,
}

/// When a subflow delivered its last data packet to the primary, and how much.
#[derive(Clone, Debug, Serialize)]
pub struct SubflowResult {
    /// `ps`, or the pipe's link name (`p11` = helper 1, pipe 1).
    pub link: String,
    /// Seconds after the request (None if it carried no data).
    pub completion_s: Option<f64>,
    /// IP bytes delivered to the primary during the download.
    pub bytes: u64,
    /// (seconds, cumulative IP bytes), sampled every 50 ms.
    pub progress: Vec<(f64, u64)>,
}

/// Bytes on one link during the download.
#[derive(Clone, Debug, Serialize)]
pub struct LinkBytes {
    /// The link.
    pub link: String,
    /// IP bytes toward the primary.
    pub down: u64,
    /// IP bytes away from it.
    pub up: u64,
    /// Queue drops and random losses, both directions.
    pub drops: u64,
}

/// Everything one run measured.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// The scheme.
    pub scheme: String,
    /// File size.
    pub size: u64,
    /// Repetition, from 0.
    pub rep: usize,
    /// Download time, seconds from the request to the last byte.
    pub seconds: f64,
    /// Whether every byte arrived intact (SHA-256).
    pub intact: bool,
    /// SHA-256 of what arrived.
    pub sha256: String,
    /// The fluid lower bound for this scenario and size.
    pub lower_bound_s: f64,
    /// seconds / lower bound.
    pub ratio_to_bound: f64,
    /// Per subflow into the primary.
    pub subflows: Vec<SubflowResult>,
    /// Per link.
    pub links: Vec<LinkBytes>,
    /// Download progress (seconds, bytes).
    pub progress: Vec<(f64, u64)>,
}

/// Children killed on drop.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs `f` on a thread inside namespace `ns`, with its own single-threaded runtime.
fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce(&tokio::runtime::Runtime) -> anyhow::Result<T> + Send + 'static,
) -> std::thread::JoinHandle<anyhow::Result<T>> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        netns::enter(&ns)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        f(&rt)
    })
}

/// A server thread in a namespace, stopped (and joined) on drop, so the namespace can go.
struct Server {
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl Server {
    fn start<F>(ns: &str, f: impl FnOnce() -> F + Send + 'static) -> Server
    where
        F: std::future::Future<Output = std::io::Result<()>>,
    {
        let (stop, mut rx) = watch::channel(false);
        let thread = in_ns(ns, move |rt| {
            rt.block_on(async move {
                tokio::select! {
                    r = f() => r.map_err(anyhow::Error::from),
                    _ = rx.changed() => Ok(()),
                }
            })
        });
        Server {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The fluid lower bound of a scenario for `size` bytes and the scheme's device set: payload
/// capacity of the PS-Path and of each helper path (HS then pipe), plus the request's trip.
/// `topo` must have its time 0 at the request (`Scenario::topology(Duration::ZERO)`).
pub fn bound(topo: &TopologySpec, size: u64, helpers: usize) -> f64 {
    let scale = |c: &mpbond_sim::link::LinkConfig| {
        // Every constant segment scaled to its payload share.
        let segs: Vec<_> = c.rate.segments().to_vec();
        let mut r = mpbond_sim::rate::RateProfile::constant(0.0);
        for (at, src) in segs {
            let s = match src {
                mpbond_sim::rate::Source::Constant(b) => {
                    mpbond_sim::rate::Source::Constant(b * PAYLOAD_SHARE)
                }
                t => t,
            };
            r.change_at(at, s);
        }
        r
    };
    let ps = scale(&topo.ps.down);
    let hs: Vec<_> = topo
        .helpers
        .iter()
        .take(helpers)
        .map(|h| scale(&h.hs.down))
        .collect();
    let pipes: Vec<_> = topo
        .helpers
        .iter()
        .take(helpers)
        .map(|h| scale(&h.pipes[0].down))
        .collect();
    let mut paths = vec![FluidPath {
        wan: &ps,
        wan_delay: topo.ps.down.delay,
        pipe: None,
    }];
    for (i, h) in topo.helpers.iter().take(helpers).enumerate() {
        paths.push(FluidPath {
            wan: &hs[i],
            wan_delay: h.hs.down.delay,
            pipe: Some((&pipes[i], h.pipes[0].down.delay)),
        });
    }
    lower_bound(size, &paths, Duration::from_secs(600)) + topo.ps.up.delay.as_secs_f64()
}

/// Runs one download.
pub fn run_one(
    sc: &Scenario,
    scheme: Scheme,
    size: u64,
    rep: usize,
    env: &RunEnv,
) -> anyhow::Result<RunResult> {
    let topo = sc.topology(WARMUP)?;
    let helpers_used = match scheme {
        Scheme::Single => 0,
        Scheme::Kibbutz => 1.min(topo.helpers.len()),
        _ => topo.helpers.len(),
    };
    let mut tb = Testbed::build(&topo)?;
    let work = env.work.join(format!("{}-{}-{}", scheme, size, rep));
    std::fs::create_dir_all(&work)?;
    let origin = SocketAddr::from((addr::ORIGIN, 80));
    let _origin = Server::start(&tb.names.origin, move || async move {
        let l = tokio::net::TcpListener::bind(origin).await?;
        http::serve_origin(l).await;
        Ok(())
    });
    let mut _servers = Vec::new();
    let mut _procs = Procs(Vec::new());
    let via = match scheme {
        Scheme::Single => Via::Direct,
        Scheme::Kibbutz | Scheme::KibbutzN => {
            let relay = SocketAddr::from((addr::PS_PROXY, 8080));
            for ns in [&tb.names.primary, &tb.names.proxy] {
                sh(&[
                    "ip",
                    "-n",
                    ns,
                    "mptcp",
                    "limits",
                    "set",
                    "subflows",
                    "8",
                    "add_addr_accepted",
                    "8",
                ])?;
            }
            for pipes in tb.pipes.iter().take(helpers_used) {
                for &p in pipes {
                    let (pa, _) = addr::pipe(p);
                    let dev = &tb.pipe_devs[p];
                    sh(&[
                        "ip",
                        "-n",
                        &tb.names.primary,
                        "mptcp",
                        "endpoint",
                        "add",
                        &pa.to_string(),
                        "dev",
                        dev,
                        "subflow",
                    ])?;
                }
            }
            _servers.push(Server::start(&tb.names.proxy, move || {
                http::mptcp_relay(relay, origin)
            }));
            Via::Mptcp(relay)
        }
        Scheme::Mpbond | Scheme::MpbondNaive => {
            let sched = if scheme == Scheme::Mpbond {
                "pams"
            } else {
                "minrtt"
            };
            _procs = start_mpbond(&tb, &work, &env.exe, sched, helpers_used)?;
            Via::Socks(SocketAddr::from(([127, 0, 0, 1], 1080)))
        }
    };
    // Wait for the workload's start time.
    let emu_now = || tb.emu.as_ref().map_or(WARMUP, |e| e.now());
    while emu_now() < WARMUP {
        std::thread::sleep(Duration::from_millis(5));
    }
    let start_us = emu_now().as_micros() as u64;
    let fetch = in_ns(&tb.names.primary, move |rt| {
        rt.block_on(async move {
            let started = Instant::now();
            let mut s = http::connect(origin, &via).await?;
            Ok(http::get(&mut s, size, None, started).await?)
        })
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
    std::thread::sleep(Duration::from_millis(50));
    let links = tb.emu.take().map(|e| e.stop()).unwrap_or_default();
    drop(_procs);
    drop(_servers);
    drop(_origin);
    drop(tb);
    let lb = bound(&sc.topology(Duration::ZERO)?, size, helpers_used);
    let subflows = subflow_results(&links, start_us);
    let link_bytes = links
        .iter()
        .map(|l| LinkBytes {
            link: l.name.clone(),
            down: bytes_after(&l.ba.records, start_us),
            up: bytes_after(&l.ab.records, start_us),
            drops: l.ab.queue_drops + l.ab.losses + l.ba.queue_drops + l.ba.losses,
        })
        .collect();
    Ok(RunResult {
        scheme: scheme.to_string(),
        size,
        rep,
        seconds: fetch.seconds,
        intact: fetch.intact,
        sha256: fetch.sha256,
        lower_bound_s: lb,
        ratio_to_bound: fetch.seconds / lb,
        subflows,
        links: link_bytes,
        progress: fetch.progress,
    })
}

fn bytes_after(records: &[crate::emu::PacketRecord], start_us: u64) -> u64 {
    records
        .iter()
        .filter(|r| r.event == PacketEvent::Delivered && r.t_us >= start_us)
        .map(|r| u64::from(r.size))
        .sum()
}

/// Data packets (over 200 bytes) delivered toward the primary on `ps` and on every pipe.
fn subflow_results(links: &[LinkReport], start_us: u64) -> Vec<SubflowResult> {
    links
        .iter()
        .filter(|l| l.name == "ps" || l.name.starts_with('p') && l.name != "ps2")
        .map(|l| {
            let data: Vec<_> = l
                .ba
                .records
                .iter()
                .filter(|r| r.event == PacketEvent::Delivered && r.t_us >= start_us && r.size > 200)
                .collect();
            let mut progress = Vec::new();
            let mut total = 0u64;
            let mut last_t = -1.0;
            for r in &data {
                total += u64::from(r.size);
                let t = (r.t_us - start_us) as f64 / 1e6;
                if t - last_t >= 0.05 {
                    progress.push((t, total));
                    last_t = t;
                }
            }
            let completion_s = data.last().map(|r| (r.t_us - start_us) as f64 / 1e6);
            if let Some(c) = completion_s {
                progress.push((c, total));
            }
            SubflowResult {
                link: l.name.clone(),
                completion_s,
                bytes: total,
                progress,
            }
        })
        .collect()
}

/// Writes keys and configs and starts proxy, helpers and primary in their namespaces.
fn start_mpbond(
    tb: &Testbed,
    work: &Path,
    exe: &Path,
    scheduler: &str,
    helpers: usize,
) -> anyhow::Result<Procs> {
    let proxy = KeyPair::generate();
    let phone = KeyPair::generate();
    proxy.save(&work.join("proxy.key"))?;
    phone.save(&work.join("phone.key"))?;
    let proxy_addr = SocketAddr::from((addr::PS_PROXY, 7000));
    std::fs::write(
        work.join("proxy.toml"),
        format!(
            "key = \"proxy.key\"\nlog = \"warn\"\n[proxy]\nlisten = \"0.0.0.0:7000\"\nscheduler = \"{scheduler}\"\ndeny_origins = []\nallow = [{{ name = \"phone\", key = \"{}\" }}]\n",
            phone.public
        ),
    )?;
    let mut primary = format!(
        "key = \"phone.key\"\nlog = \"warn\"\n[primary]\nproxy = \"{proxy_addr}\"\nproxy_key = \"{}\"\nps_bind = \"{}\"\nsocks = \"127.0.0.1:1080\"\nscheduler = \"{scheduler}\"\n",
        proxy.public,
        addr::PS_PRIMARY
    );
    let mut procs = Procs(Vec::new());
    let spawn = |ns: &str, role: &str, cfg: &str| -> anyhow::Result<Child> {
        let log = std::fs::File::create(work.join(format!("{cfg}.log")))?;
        Ok(Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args([role, "-c"])
            .arg(work.join(format!("{cfg}.toml")))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?)
    };
    procs.0.push(spawn(&tb.names.proxy, "proxy", "proxy")?);
    for (i, pipes) in tb.pipes.iter().enumerate().take(helpers) {
        let k = KeyPair::generate();
        k.save(&work.join(format!("helper{}.key", i + 1)))?;
        let (hs_ip, _) = addr::hs(i);
        std::fs::write(
            work.join(format!("helper{}.toml", i + 1)),
            format!(
                "key = \"helper{}.key\"\nlog = \"warn\"\n[helper]\nlisten = \"0.0.0.0:7100\"\nhs_bind = \"{hs_ip}\"\nallow = [{{ name = \"phone\", key = \"{}\" }}]\n",
                i + 1,
                phone.public
            ),
        )?;
        primary.push_str(&format!(
            "[[primary.helper]]\nname = \"helper{}\"\nkey = \"{}\"\n",
            i + 1,
            k.public
        ));
        for &p in pipes {
            let (pa, pb) = addr::pipe(p);
            primary.push_str(&format!(
                "[[primary.helper.pipe]]\nname = \"pipe{p}\"\naddr = \"{pb}:7100\"\nbind = \"{pa}\"\n"
            ));
        }
        procs.0.push(spawn(
            &tb.names.helpers[i],
            "helper",
            &format!("helper{}", i + 1),
        )?);
    }
    std::fs::write(work.join("primary.toml"), primary)?;
    std::thread::sleep(Duration::from_millis(200));
    procs
        .0
        .push(spawn(&tb.names.primary, "primary", "primary")?);
    Ok(procs)
}
