//! The testbed: one namespace per device, the emulated links between them, and routes.
//!
//! ```text
//!            PS-Path (ps)                       proxy–origin (veth, unconstrained)
//!   primary ─────────────────────── proxy ─────────────────────── origin
//!      │  pipe k                     │ HS-Path k (hs<k>)
//!      └──────────── helper k ───────┘
//! ```
//!
//! Side `a` of every emulated link is the end nearer the primary (the primary for `ps` and
//! pipes, the helper for `hs`), so "down" is b→a everywhere. The proxy namespace is also the
//! Internet's router: `single` and `combine` traffic crosses it to the origin, and helpers
//! forward at layer 3 for `kibbutz`.

use std::net::Ipv4Addr;

use mpbond_sim::link::LinkConfig;

use crate::emu::{Emulator, LinkSpec};
use crate::netns::{IpBatch, Namespaces, NetError};
use crate::tun::Tun;

/// The largest send buffer TCP autotuning may give a socket in every namespace
/// (`net.ipv4.tcp_wmem`'s maximum, Linux's default): it holds a sender's unacknowledged
/// bytes, so it bounds any transport's window (`run::WINDOW_BOUND`).
pub const SEND_BUFFER_MAX: u64 = 4 << 20;

/// The largest receive buffer TCP autotuning may give a socket in every namespace
/// (`net.ipv4.tcp_rmem`'s maximum, Linux's default), pinned like the send buffer so that
/// results do not follow the host's setting (32 MiB on this machine).
pub const RECEIVE_BUFFER_MAX: u64 = 6 << 20;

/// The receive buffer a TCP socket starts with on the origin and the proxy
/// (`net.ipv4.tcp_rmem`'s default, Linux's 128 KiB): servers, as the paper's were.
pub const LINUX_RECEIVE_BUFFER: u64 = 128 << 10;

/// The receive buffer a TCP socket starts with on the phones by default (the primary and
/// the helpers; `TopologySpec::phone_rcvbuf`, scenario key `phone_rcvbuf`): 1 MiB, the start
/// of the LTE buffer profile in many Android device trees
/// (`net.tcp.buffersize.lte=524288,1048576,2097152,...`; the profiles range from 0.5 to
/// 4 MiB): closer to what the paper's Android phones would have had than a Linux server's
/// 128 KiB (the paper does not say). The maximum stays the testbed's [`RECEIVE_BUFFER_MAX`].
///
/// The choice moves kibbutz's MPTCP, whose receive window the subflows share: with
/// 128 KiB to start, 12 of 25 runs of kibbutz in 03 took 8.5-28 s instead of 6.3-7.1, in
/// each the primary dropping 20-92 segments outside its MPTCP window (`NoDSSInWindow`)
/// that only MPTCP's backed-off data-level retransmission recovered; with 1 MiB or more
/// none of 21 runs did (5.7-6.7 s). Over 10a's LTE traces the start made no difference to
/// kibbutz or mpbond (docs/evaluation.md, "What differs"). `--phone-rcvbuf 128KiB` gives
/// the testbed of the suites before 1 MiB became the default.
pub const PHONE_RECEIVE_BUFFER: u64 = 1 << 20;

/// Both directions of one link.
#[derive(Clone, Debug)]
pub struct LinkParams {
    /// Toward the primary (b→a).
    pub down: LinkConfig,
    /// Away from the primary (a→b).
    pub up: LinkConfig,
    /// Whether the rates are the radio's own (a `wlan:` profile, whose rate follows the
    /// distance) rather than a throttle on a WLAN close by: a WiFi radio's airtime is priced
    /// against them (`mpbond_sim::energy::air_mbps`).
    pub radio_rate: bool,
}

/// A helper's links.
#[derive(Clone, Debug)]
pub struct HelperLinks {
    /// Its HS-Path.
    pub hs: LinkParams,
    /// Its pipes to the primary (at least one).
    pub pipes: Vec<LinkParams>,
}

/// What to build.
#[derive(Clone, Debug)]
pub struct TopologySpec {
    /// The primary's WAN link.
    pub ps: LinkParams,
    /// A second WAN link of the primary (WiFi in `mptcp-wifi-lte`), if any.
    pub ps2: Option<LinkParams>,
    /// The helpers.
    pub helpers: Vec<HelperLinks>,
    /// Seed for random loss.
    pub seed: u64,
    /// TCP congestion control for every namespace (checked against the kernel's list).
    pub cc: String,
    /// The receive buffer a TCP socket starts with on the primary and the helpers (the
    /// phones): `net.ipv4.tcp_rmem`'s default there, 4 KiB to [`RECEIVE_BUFFER_MAX`]. See
    /// [`PHONE_RECEIVE_BUFFER`].
    pub phone_rcvbuf: u64,
}

/// Namespace names of a testbed.
#[derive(Clone, Debug)]
pub struct Names {
    /// The origin server's.
    pub origin: String,
    /// The proxy's (and the Internet router's).
    pub proxy: String,
    /// The primary's.
    pub primary: String,
    /// The helpers'.
    pub helpers: Vec<String>,
}

impl Names {
    /// Every device's role (`origin`, `proxy`, `primary`, `helper1`, ...) and namespace, the
    /// names reports use for devices.
    pub fn devices(&self) -> Vec<(String, String)> {
        [
            ("origin".to_string(), self.origin.clone()),
            ("proxy".to_string(), self.proxy.clone()),
            ("primary".to_string(), self.primary.clone()),
        ]
        .into_iter()
        .chain(
            self.helpers
                .iter()
                .enumerate()
                .map(|(i, n)| (format!("helper{}", i + 1), n.clone())),
        )
        .collect()
    }
}

/// Address plan.
pub mod addr {
    use std::net::Ipv4Addr;

    /// The origin server.
    pub const ORIGIN: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);
    /// The proxy's side of the proxy–origin link.
    pub const PROXY_WAN: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
    /// The primary's PS-Path address.
    pub const PS_PRIMARY: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
    /// The proxy's PS-Path address: where primaries and helpers reach the proxy.
    pub const PS_PROXY: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
    /// The primary's second WAN address.
    pub const PS2_PRIMARY: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);
    /// The proxy's end of the second WAN link.
    pub const PS2_PROXY: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 2);

    /// Helper `i`'s HS-Path address (0-based) and the proxy's end.
    pub fn hs(i: usize) -> (Ipv4Addr, Ipv4Addr) {
        let n = 11 + i as u8;
        (Ipv4Addr::new(10, n, 0, 1), Ipv4Addr::new(10, n, 0, 2))
    }

    /// Pipe `p` (numbered across helpers, 0-based): the primary's and the helper's address.
    pub fn pipe(p: usize) -> (Ipv4Addr, Ipv4Addr) {
        let n = 101 + p as u8;
        (Ipv4Addr::new(10, n, 0, 1), Ipv4Addr::new(10, n, 0, 2))
    }
}

/// A built testbed; dropping it stops the emulator and deletes every namespace (killing what
/// runs inside).
pub struct Testbed {
    /// Namespace names.
    pub names: Names,
    /// Pipe numbers of each helper (into [`addr::pipe`]).
    pub pipes: Vec<Vec<usize>>,
    /// The primary's device of each pipe, by pipe number.
    pub pipe_devs: Vec<String>,
    /// The primary's device on the second WAN link, if there is one.
    pub ps2_dev: Option<String>,
    /// The running emulator.
    pub emu: Option<Emulator>,
    // Dropped last: namespaces go after the emulator has let go of the devices.
    ns: Namespaces,
}

impl Testbed {
    /// Builds the namespaces, links, addresses and routes, and starts the emulator.
    pub fn build(spec: &TopologySpec) -> Result<Testbed, NetError> {
        let mut last = None;
        for _ in 0..5 {
            let prefix = crate::netns::run_prefix();
            match Self::build_with(spec, &prefix) {
                Ok(t) => return Ok(t),
                Err(e) if e.to_string().contains("exists") => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| NetError::Io(std::io::Error::other("no free name"))))
    }

    fn build_with(spec: &TopologySpec, prefix: &str) -> Result<Testbed, NetError> {
        let mut ns = Namespaces::default();
        let names = Names {
            origin: format!("{prefix}-origin"),
            proxy: format!("{prefix}-proxy"),
            primary: format!("{prefix}-primary"),
            helpers: (1..=spec.helpers.len())
                .map(|k| format!("{prefix}-helper{k}"))
                .collect(),
        };
        ns.add(&names.origin)?;
        ns.add(&names.proxy)?;
        ns.add(&names.primary)?;
        for h in &names.helpers {
            ns.add(h)?;
        }
        // One congestion control for the whole testbed, whatever the host's default,
        // set before any device is built so that a wrong name fails at once
        // (MPBond §6.1 ran CUBIC on every path; BBR, a common host default, behaves very
        // differently on drop-tail queues and LTE traces).
        crate::netns::allow_congestion(&spec.cc)?;
        // Kernel defaults for the send buffer, whatever the host set: the window-limited
        // bound (`run::WINDOW_BOUND`) holds every sender to its maximum.
        let wmem = format!("4096 16384 {SEND_BUFFER_MAX}");
        for n in ns.names() {
            let phone = n == &names.primary || names.helpers.contains(n);
            let start = if phone {
                spec.phone_rcvbuf
            } else {
                LINUX_RECEIVE_BUFFER
            };
            let rmem = format!("4096 {start} {RECEIVE_BUFFER_MAX}");
            let set = [
                ("net.ipv4.tcp_congestion_control", spec.cc.as_str()),
                ("net.ipv4.tcp_wmem", wmem.as_str()),
                ("net.ipv4.tcp_rmem", rmem.as_str()),
            ];
            if crate::netns::sysctl(n, &set, true).is_err() {
                // Someone may have shrunk the allowed list since: allow it again, once.
                crate::netns::allow_congestion(&spec.cc)?;
                crate::netns::sysctl(n, &set, true)?;
            }
        }
        // Proxy–origin: a veth pair, no emulation.
        let (vp, vo) = (format!("{prefix}wp"), format!("{prefix}wo"));
        // Every `ip` command from here runs at the end, batched (crate::netns::IpBatch).
        let mut ip = IpBatch::default();
        ip.root(&[
            "link",
            "add",
            &vp,
            "netns",
            &names.proxy,
            "type",
            "veth",
            "peer",
            "name",
            &vo,
            "netns",
            &names.origin,
        ]);
        p2p(&mut ip, &names.proxy, &vp, addr::PROXY_WAN, addr::ORIGIN);
        p2p(&mut ip, &names.origin, &vo, addr::ORIGIN, addr::PROXY_WAN);
        // A veth is Ethernet: the origin's default route needs the proxy as gateway (a bare
        // `dev` route would ARP for every remote address).
        ip.ns(
            &names.origin,
            &[
                "route",
                "add",
                "default",
                "via",
                &addr::PROXY_WAN.to_string(),
                "dev",
                &vo,
            ],
        );

        let mut links = Vec::new();
        let mut tun_link = |ip: &mut IpBatch,
                            name: &str,
                            a_ns: &str,
                            a_ip: Ipv4Addr,
                            b_ns: &str,
                            b_ip: Ipv4Addr,
                            p: &LinkParams|
         -> Result<(String, String), NetError> {
            let (an, bn) = (format!("{prefix}{name}a"), format!("{prefix}{name}b"));
            let a = Tun::create(&an)?;
            let b = Tun::create(&bn)?;
            ip.root(&["link", "set", &an, "netns", a_ns]);
            ip.root(&["link", "set", &bn, "netns", b_ns]);
            p2p(ip, a_ns, &an, a_ip, b_ip);
            p2p(ip, b_ns, &bn, b_ip, a_ip);
            links.push(LinkSpec {
                name: name.to_string(),
                a,
                b,
                ab: p.up.clone(),
                ba: p.down.clone(),
            });
            Ok((an, bn))
        };
        let (ps_a, _) = tun_link(
            &mut ip,
            "ps",
            &names.primary,
            addr::PS_PRIMARY,
            &names.proxy,
            addr::PS_PROXY,
            &spec.ps,
        )?;
        let mut ps2_dev = None;
        if let Some(p2) = &spec.ps2 {
            let (a, _) = tun_link(
                &mut ip,
                "ps2",
                &names.primary,
                addr::PS2_PRIMARY,
                &names.proxy,
                addr::PS2_PROXY,
                p2,
            )?;
            ps2_dev = Some(a);
        }
        let mut pipes = Vec::new();
        let mut pnum = 0;
        let mut routes = Vec::new();
        for (i, h) in spec.helpers.iter().enumerate() {
            let hns = &names.helpers[i];
            let (hs_ip, hs_proxy) = addr::hs(i);
            let (hs_a, hs_b) = tun_link(
                &mut ip,
                &format!("hs{}", i + 1),
                hns,
                hs_ip,
                &names.proxy,
                hs_proxy,
                &h.hs,
            )?;
            // The helper reaches everything through its own WAN link.
            ip.ns(hns, &["route", "add", "default", "dev", &hs_a]);
            let mut mine = Vec::new();
            for (j, pp) in h.pipes.iter().enumerate() {
                let (pa_ip, pb_ip) = addr::pipe(pnum);
                let (pa, _) = tun_link(
                    &mut ip,
                    &format!("p{}{}", i + 1, j + 1),
                    &names.primary,
                    pa_ip,
                    hns,
                    pb_ip,
                    pp,
                )?;
                routes.push((pnum, pa, hs_b.clone()));
                mine.push(pnum);
                pnum += 1;
            }
            pipes.push(mine);
        }
        // The primary: everything over its own WAN link, except traffic sourced from a pipe
        // address (kibbutz's tethered subflow), which goes to that pipe's helper.
        ip.ns(&names.primary, &["route", "add", "default", "dev", &ps_a]);
        if let Some(dev) = &ps2_dev {
            // The second WAN interface carries what is sourced from its address
            // (mptcp-wifi-lte's second subflow).
            ip.ns(
                &names.primary,
                &["route", "add", "default", "dev", dev, "table", "99"],
            );
            ip.ns(
                &names.primary,
                &[
                    "rule",
                    "add",
                    "from",
                    &addr::PS2_PRIMARY.to_string(),
                    "table",
                    "99",
                ],
            );
        }
        for (p, dev, hs_b) in &routes {
            let (pa_ip, _) = addr::pipe(*p);
            let table = (100 + p).to_string();
            ip.ns(
                &names.primary,
                &["route", "add", "default", "dev", dev, "table", &table],
            );
            ip.ns(
                &names.primary,
                &["rule", "add", "from", &pa_ip.to_string(), "table", &table],
            );
            // The Internet (the proxy namespace) routes the pipe address back via the helper.
            ip.ns(
                &names.proxy,
                &["route", "add", &format!("{pa_ip}/32"), "dev", hs_b],
            );
        }
        ip.run()?;
        // Devices moved in from the root namespace kept its per-device settings: forwarding on
        // and reverse-path filtering off for every device, now that all are in place. IPv6
        // off: the testbed is IPv4, and a router solicitation (48 bytes) sent seconds after a
        // device came up once landed on a pipe during a `single` run.
        for n in ns.names() {
            crate::netns::sysctl(
                n,
                &[
                    ("net.ipv4.ip_forward", "1"),
                    ("net.ipv4.conf.*.rp_filter", "0"),
                ],
                true,
            )?;
            crate::netns::sysctl(n, &[("net.ipv6.conf.*.disable_ipv6", "1")], false)?;
        }
        let pipe_devs = routes.iter().map(|(_, dev, _)| dev.clone()).collect();
        let emu = Emulator::start(links, spec.seed)?;
        Ok(Testbed {
            names,
            pipes,
            pipe_devs,
            ps2_dev,
            emu: Some(emu),
            ns,
        })
    }

    /// All namespace names.
    pub fn namespaces(&self) -> &[String] {
        self.ns.names()
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // The emulator first (it holds the TUN devices), then the namespaces.
        drop(self.emu.take());
    }
}

/// Point-to-point addressing on a device, and up.
fn p2p(ip: &mut IpBatch, ns: &str, dev: &str, local: Ipv4Addr, peer: Ipv4Addr) {
    ip.ns(
        ns,
        &[
            "addr",
            "add",
            &format!("{local}/32"),
            "peer",
            &format!("{peer}/32"),
            "dev",
            dev,
        ],
    );
    ip.ns(ns, &["link", "set", dev, "mtu", "1500", "up"]);
}
