//! The kernel's network counters (`/proc/net/netstat`, `/proc/net/snmp`) of each
//! namespace, before and after a run's workload.
//!
//! A packet log shows what crossed the links, not why a sender held back. The kernel's MIB
//! counters say that for the schemes whose logic lives in the kernel (kibbutz's MPTCP: its
//! `MPTcpExt` counters of data-level retransmissions, stale subflows and shared receive
//! windows; every scheme's `TcpExt` and `Tcp` counters of losses, probes and timeouts).
//! Counters are per network namespace, so each device of the testbed has its own.

use std::collections::BTreeMap;
use std::path::Path;

/// One snapshot: (namespace role, `Group` `Name`) → value, e.g.
/// `("proxy", "MPTcpExt", "MPJoinAckRx") → 2`.
pub type Snapshot = BTreeMap<(String, String, String), u64>;

/// Parses the text of `/proc/net/netstat` or `/proc/net/snmp`: pairs of lines, a header
/// `Group: Name1 Name2 ...` and then `Group: v1 v2 ...`. Values that are not unsigned
/// integers (`Tcp: MaxConn -1`) are left out; a malformed pair is skipped, not fatal, since
/// a missing counter only leaves a hole in a diagnostic file.
pub fn parse(role: &str, text: &str, into: &mut Snapshot) {
    let mut lines = text.lines();
    while let (Some(head), Some(vals)) = (lines.next(), lines.next()) {
        let (Some((g1, names)), Some((g2, values))) = (head.split_once(':'), vals.split_once(':'))
        else {
            continue;
        };
        if g1 != g2 {
            continue;
        }
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = value.parse::<u64>() {
                into.insert((role.to_string(), g1.to_string(), name.to_string()), v);
            }
        }
    }
}

/// Reads the counters of the namespaces `(role, namespace name)`, entering each one in
/// turn on a thread of its own (setns changes only the calling thread, and
/// `/proc/thread-self/net` is that thread's namespace).
pub fn snapshot(namespaces: &[(String, String)]) -> std::io::Result<Snapshot> {
    let namespaces = namespaces.to_vec();
    std::thread::spawn(move || {
        let mut snap = Snapshot::new();
        for (role, ns) in &namespaces {
            crate::netns::enter(ns).map_err(std::io::Error::other)?;
            for file in ["netstat", "snmp"] {
                let text = std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))?;
                parse(role, &text, &mut snap);
            }
        }
        Ok(snap)
    })
    .join()
    .map_err(|_| std::io::Error::other("the counter-reading thread panicked"))?
}

/// The counters that moved between two snapshots, as `(role, group, name, increase)`.
/// Gauges that fell (`Tcp: CurrEstab`) are left out with the counters that did not move.
pub fn moved(before: &Snapshot, after: &Snapshot) -> Vec<(String, String, String, u64)> {
    after
        .iter()
        .filter_map(|(k, &v)| {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.0.clone(), k.1.clone(), k.2.clone(), d))
        })
        .collect()
}

/// The counters every run keeps in its result (`RunResult::kernel`) and reports show per
/// scheme, whatever the scheme: the kernel's own view of losses and of MPTCP's data level.
pub const REPORTED: &[(&str, &str)] = &[
    // Segments TCP sent again (losses, timeouts, probes), every connection of the device.
    ("Tcp", "RetransSegs"),
    // Retransmission timeouts: the costly way to recover.
    ("TcpExt", "TCPTimeouts"),
    // MPTCP: data sent again at the data level (over any subflow).
    ("MPTcpExt", "MPTCPRetrans"),
    // MPTCP: segments dropped by the receiver as outside its connection-level window after
    // their subflow acknowledged them; only a data-level retransmission recovers them.
    ("MPTcpExt", "NoDSSInWindow"),
];

/// Of [`moved`]'s rows, those in [`REPORTED`], keyed `"<device> <Name>"` (e.g.
/// `"primary NoDSSInWindow"`).
pub fn reported(rows: &[(String, String, String, u64)]) -> BTreeMap<String, u64> {
    rows.iter()
        .filter(|(_, g, n, _)| REPORTED.iter().any(|(rg, rn)| rg == g && rn == n))
        .map(|(d, _, n, v)| (format!("{d} {n}"), *v))
        .collect()
}

/// Writes [`moved`]'s rows as CSV: `device,group,counter,increase`.
pub fn write(path: &Path, rows: &[(String, String, String, u64)]) -> std::io::Result<()> {
    let mut out = String::from("device,group,counter,increase\n");
    for (role, group, name, d) in rows {
        out.push_str(&format!("{role},{group},{name},{d}\n"));
    }
    std::fs::write(path, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NETSTAT: &str = "TcpExt: SyncookiesSent TCPLossProbes\nTcpExt: 0 7\n\
MPTcpExt: MPCapableSYNRX MPTCPRetrans RcvWndShared\nMPTcpExt: 1 4 9\n";
    const SNMP: &str = "Tcp: RtoAlgorithm MaxConn RetransSegs CurrEstab\nTcp: 1 -1 12 3\n\
Udp: InDatagrams\nUdp: 5\n";

    #[test]
    fn parses_both_files_and_skips_signed_values() {
        let mut s = Snapshot::new();
        parse("proxy", NETSTAT, &mut s);
        parse("proxy", SNMP, &mut s);
        let get = |g: &str, n: &str| s.get(&("proxy".into(), g.into(), n.into())).copied();
        assert_eq!(get("MPTcpExt", "MPTCPRetrans"), Some(4));
        assert_eq!(get("TcpExt", "TCPLossProbes"), Some(7));
        assert_eq!(get("Tcp", "RetransSegs"), Some(12));
        assert_eq!(get("Udp", "InDatagrams"), Some(5));
        assert_eq!(get("Tcp", "MaxConn"), None, "-1 is not a counter");
    }

    #[test]
    fn a_header_without_its_values_is_skipped() {
        let mut s = Snapshot::new();
        parse(
            "primary",
            "TcpExt: A B\nMPTcpExt: 1 2\nTcp: C\nTcp: 3\n",
            &mut s,
        );
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s.contains_key(&("primary".into(), "Tcp".into(), "C".into())));
    }

    #[test]
    fn moved_keeps_increases_only() {
        let mut a = Snapshot::new();
        let mut b = Snapshot::new();
        parse("proxy", SNMP, &mut a);
        parse(
            "proxy",
            "Tcp: RtoAlgorithm MaxConn RetransSegs CurrEstab\nTcp: 1 -1 20 1\n",
            &mut b,
        );
        let m = moved(&a, &b);
        assert_eq!(
            m,
            vec![("proxy".into(), "Tcp".into(), "RetransSegs".into(), 8)]
        );
    }

    #[test]
    fn reported_keeps_the_listed_counters_by_device() {
        let rows = vec![
            ("proxy".into(), "Tcp".into(), "RetransSegs".into(), 12),
            ("proxy".into(), "Tcp".into(), "InSegs".into(), 900),
            (
                "primary".into(),
                "MPTcpExt".into(),
                "NoDSSInWindow".into(),
                50,
            ),
            ("primary".into(), "TcpExt".into(), "RetransSegs".into(), 3),
        ];
        let r = reported(&rows);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r.get("proxy RetransSegs"), Some(&12));
        assert_eq!(r.get("primary NoDSSInWindow"), Some(&50));
    }

    #[test]
    fn reads_this_namespace_when_entered() {
        // Needs root, as every lab test with namespaces (tests/emulator.rs).
        let name = format!("mpbct{}", std::process::id());
        let ok = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(
            ok,
            "cannot create a network namespace (the lab tests need root)"
        );
        let s = snapshot(&[("dev".into(), name.clone())]);
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &name])
            .status();
        let s = s.expect("counters of a fresh namespace");
        // A fresh namespace has every TCP counter at 0 but the algorithm fields set.
        assert_eq!(
            s.get(&("dev".into(), "Tcp".into(), "RtoAlgorithm".into())),
            Some(&1)
        );
        assert_eq!(
            s.get(&("dev".into(), "Tcp".into(), "ActiveOpens".into())),
            Some(&0)
        );
    }
}
